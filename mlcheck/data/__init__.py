"""Data and images: dataset checks and staging in their real formats, container image builds."""
