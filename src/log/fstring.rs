//! What a rule's template prints, found without running it (`python::printed`), for the
//! rules of a set: `test-rules` holds these lines against the rule's print declarations.

pub use crate::python::printed::{Line, Part, show};

/// The lines each rule prints (by rule index), in template order: the rule set's own reading.
pub use crate::rules::prints::printed_lines;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::load_with_prints;

    #[test]
    fn follows_helpers_locals_conditionals_and_appended_lists() {
        let set = load_with_prints("memory-prints").unwrap();
        let lines = printed_lines(&set);
        let of = |id: &str| {
            let i = set.rules.iter().position(|r| r.id == id).unwrap();
            lines
                .get(&i)
                .map(|ls| ls.iter().map(show).collect::<Vec<_>>())
                .unwrap_or_default()
        };
        // A helper that prints its parameter inside its own line: the caller's line.
        assert_eq!(
            of("5B.before-compute"),
            vec![
                "[rank=⟨rank⟩]     layer⟨self.idx⟩ stage1: before forward_stage1_compute: alloc=⟨alloc:.2f⟩"
            ]
        );
        assert!(
            of("1B.layer-helpers").iter().all(|l| !l.contains("label")),
            "_lmem's own line is its callers'"
        );
        // A helper returning an f-string, inlined where it is formatted.
        assert_eq!(
            of("4E.step4-print"),
            vec![
                "[rank=⟨self.rank⟩ pp=⟨pp_rank⟩] Step4 i=⟨$I⟩: ⟨_mem_gb():.2f⟩ GiB | alloc=⟨allocated / G:.2f⟩ cached=⟨cached / G:.2f⟩ non-pt=⟨non_pytorch / G:.2f⟩"
            ]
        );
        // The saved-tensor lines: a header from a local, two entries from `tag`'s two
        // values through the list the class appends to, the totals.
        let saved = of("1B.layer-helpers");
        assert_eq!(saved.len(), 4, "{saved:#?}");
        assert!(saved.contains(&"[rank=⟨rank⟩]     saved (weight): ⟨tuple(t.shape)⟩ ⟨t.dtype⟩ (⟨nbytes / 1024**2:.1f⟩ MB)".to_string()));
        assert!(saved.contains(
            &"[rank=⟨rank⟩] layer⟨self._layer_idx⟩ ⟨self._stage_name⟩ saved tensors:".to_string()
        ));
        // Metavariables filled in at add time stay fields, in literal text too.
        assert_eq!(
            of("5D.gpt-oss.after-activation"),
            vec![
                "[rank=⟨rank⟩]       experts: after clamped_swiglu  ⟨$ACT⟩=⟨tuple($ACT.shape)⟩: alloc=⟨alloc:.2f⟩"
            ]
        );
        // A helper called through an imported module, with the caller's prefix; strings
        // set in both branches of an `if` give a line for each.
        let choice: Vec<String> = of("4A.profiling-flag")
            .into_iter()
            .filter(|l| l.contains("detail layers"))
            .collect();
        assert_eq!(choice.len(), 4, "{choice:#?}");
        assert!(
            choice
                .iter()
                .all(|l| l.starts_with("[rank=⟨self.rank⟩ pp=⟨pp_rank⟩] detail layers"))
        );
        assert!(
            choice
                .iter()
                .any(|l| l.contains(": none, none of the layers this rank holds ("))
        );
        assert!(
            choice
                .iter()
                .any(|l| l.contains(": the layers of --detail-layers ⟨given⟩ this rank holds ("))
        );
        // What a helper prints on its own is the line of the rule that defines it, not
        // of every rule that calls it (7.before-step and 7.after-optimizer call them,
        // the second through an assignment).
        let state = of("7.state");
        assert_eq!(state.len(), 6, "{state:#?}");
        assert!(state.contains(
            &"[rank=⟨rank⟩] Memory snapshot saved to ⟨socket.gethostname()⟩:⟨path⟩".to_string()
        ));
        assert!(of("7.before-step").is_empty());
        assert!(of("7.after-optimizer").is_empty());
        assert!(of("5D.param").is_empty());
    }
}
