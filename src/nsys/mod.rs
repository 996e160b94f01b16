//! Nsight Systems helpers (`instrument nsys ...`).
