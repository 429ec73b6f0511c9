"""mlcheck: site-portable ReFrame checks for distributed PyTorch in containers."""
