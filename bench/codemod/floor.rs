//! The floor of any tree-sitter codemod on the same input: one process that reads the
//! target files and parses each with tree-sitter-python, nothing else. `bench/codemod/run.py`
//! times it next to `instrument add --dry-run`.
//!
//!     cargo build --release --example codemod_floor
//!     target/release/examples/codemod_floor [--threads] ROOT FILE...

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let threads = args.first().is_some_and(|a| a == "--threads");
    if threads {
        args.remove(0);
    }
    let (root, files) = args
        .split_first()
        .expect("usage: codemod_floor [--threads] ROOT FILE...");
    let parse = |file: &String| {
        let text = std::fs::read(std::path::Path::new(root).join(file)).expect("read");
        let mut parser = tree_sitter::Parser::new();
        parser
            .set_language(&tree_sitter_python::LANGUAGE.into())
            .expect("grammar");
        let tree = parser.parse(&text, None).expect("parse");
        tree.root_node().child_count() as usize
    };
    let nodes: usize = if threads {
        std::thread::scope(|s| {
            let handles: Vec<_> = files.iter().map(|f| s.spawn(move || parse(f))).collect();
            handles.into_iter().map(|h| h.join().expect("parse")).sum()
        })
    } else {
        files.iter().map(parse).sum()
    };
    println!("{nodes}");
}
