//! The integration tests: one binary (as ripgrep keeps one), each file of this folder a module,
//! so that `cargo test` links the tests once instead of once per file.

mod common;
mod log_common;
mod nsys_common;
mod snapshot_common;

mod codemod_cli;
mod codemod_compiled;
mod codemod_errors;
mod codemod_exit;
mod codemod_flags;
mod codemod_layers;
mod codemod_layouts;
mod codemod_models;
mod codemod_output;
mod codemod_python;
mod codemod_real;
mod codemod_roundtrip;
mod codemod_trust;
mod inserted_binds;
mod log_compare;
mod log_fixture;
mod log_html;
mod log_inputs;
mod log_stream;
mod nsys_command;
mod nsys_errors;
mod nsys_gate;
mod nsys_html;
mod nsys_ranks;
mod nsys_real;
mod nsys_report;
mod nsys_tracejson;
mod nvtx_rules;
mod rules_cli;
mod skills_commands;
mod skills_install;
mod snapshot_analysis;
mod snapshot_diff_ranks;
mod snapshot_differential;
mod snapshot_files;
mod snapshot_forms;
mod snapshot_generator;
mod snapshot_html;
mod snapshot_reader;
mod snapshot_real;
