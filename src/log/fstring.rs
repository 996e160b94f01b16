//! Symbolic evaluation of the lines a template prints.
