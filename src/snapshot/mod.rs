//! PyTorch memory-snapshot reader and analysis (`instrument snapshot`).
