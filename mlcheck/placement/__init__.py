"""Launch and placement: node topology and CPU masks, job layout and rank environment, container runtimes."""
