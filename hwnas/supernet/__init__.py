"""Weight-sharing supernets: forward(x, arch), extract(arch), training."""
