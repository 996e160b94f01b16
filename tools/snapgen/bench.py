"""Large snapshots for bench/snapshot."""

def generate(path, target_bytes, protocol, seed):
    raise NotImplementedError
