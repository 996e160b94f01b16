//! `test-rules`: every declaration reads back what its rule prints.
