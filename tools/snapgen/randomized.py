"""Random graphs."""

def generate(out, n, seed):
    raise NotImplementedError
