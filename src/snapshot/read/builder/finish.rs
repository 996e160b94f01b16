//! The top-level object is complete: assemble the [`Snapshot`].

use super::keys::*;
use super::*;

impl Builder {
    /// Text of a small value, for `allocator_settings`.
    fn display(&self, v: PV, depth: usize) -> String {
        match self.val(self.peek(v)) {
            Value::None => "None".into(),
            Value::Bool(b) => if b { "True" } else { "False" }.into(),
            Value::Int(i) => i.to_string(),
            Value::UInt(u) => u.to_string(),
            Value::Float(f) => f.to_string(),
            Value::Str(s) => self.strings.get(s).to_string(),
            Value::Obj(r) if depth < 4 => match self.slot_of(r).map(|s| &s.body) {
                Some(Body::Dict(items)) => {
                    let parts: Vec<String> = items
                        .iter()
                        .map(|&(k, v)| {
                            format!(
                                "{}: {}",
                                self.display(k, depth + 1),
                                self.display(v, depth + 1)
                            )
                        })
                        .collect();
                    format!("{{{}}}", parts.join(", "))
                }
                Some(Body::Tuple(items)) | Some(Body::List(ListRepr::Generic(items))) => {
                    let parts: Vec<String> =
                        items.iter().map(|&v| self.display(v, depth + 1)).collect();
                    format!("[{}]", parts.join(", "))
                }
                _ => "…".into(),
            },
            other => other.type_name().into(),
        }
    }

    /// `external_annotations`: a list of dicts (`name`, `stage`, `device`, `time_us`, as
    /// torch's `recordAnnotation` writes them). Entries of another shape are skipped:
    /// they only ever add step boundaries, so a missing one costs nothing.
    fn annotations(&self, v: PV) -> Vec<Annotation> {
        let mut out = Vec::new();
        let Some(r) = self.peek(v).as_obj() else {
            return out;
        };
        let Some(Body::List(ListRepr::Generic(items))) = self.slot_of(r).map(|s| &s.body) else {
            return out;
        };
        let key = |k: &str| self.strings.lookup(k);
        let (name_k, stage_k) = (Some(K_NAME), key("stage"));
        for &item in items {
            let Some(Body::Dict(kv)) = self
                .peek(item)
                .as_obj()
                .and_then(|r| self.slot_of(r))
                .map(|s| &s.body)
            else {
                continue;
            };
            let mut a = Annotation {
                name: String::new(),
                stage: String::new(),
                device: None,
                time_us: None,
            };
            for &(k, v) in kv {
                let k = k.str_id();
                match (self.val(self.peek(v)), k) {
                    (Value::Str(s), k) if k == name_k => a.name = self.strings.get(s).to_string(),
                    (Value::Str(s), k) if k.is_some() && k == stage_k => {
                        a.stage = self.strings.get(s).to_string()
                    }
                    (Value::Int(i), Some(K_DEVICE)) => a.device = Some(i),
                    (Value::Int(i), Some(K_TIME_US)) => a.time_us = Some(i),
                    _ => {}
                }
            }
            if !a.name.is_empty() {
                out.push(a);
            }
        }
        out
    }

    pub fn finish(mut self, top: PV, mut layout: Layout, file_bytes: u64) -> BResult<Snapshot> {
        let top = self.resolve(top)?;
        let items = match self.val(top) {
            Value::Obj(r) => match self.slot_of(r).map(|s| &s.body) {
                Some(Body::Dict(items)) => items.clone(),
                Some(Body::List(_)) => {
                    // `torch.cuda.memory_snapshot()`: a bare list of segments.
                    layout.segments_only = true;
                    vec![(PV::str(K_SEGMENTS), top)]
                }
                Some(Body::Tuple(_)) => {
                    return err("the top-level object is a tuple, expected a snapshot dict");
                }
                Some(Body::Event(_)) => {
                    return err("the top-level object is a trace entry, expected a snapshot dict");
                }
                _ => return self.stale(),
            },
            Value::Released | Value::Discarded => return need_retain("the top-level object"),
            other => {
                return err(format!(
                    "the top-level object is {}, expected a snapshot dict",
                    other.type_name()
                ));
            }
        };
        let mut segments = Vec::new();
        let mut traces = Vec::new();
        let mut settings = Vec::new();
        let mut annotations = Vec::new();
        let mut have_segments = false;
        for (k, v) in items {
            let Some(k) = k.str_id() else { continue };
            match k {
                K_SEGMENTS => {
                    have_segments = true;
                    match self.take_list(v, "`segments`")? {
                        ListRepr::Segments(s) => segments = s,
                        l if l.is_empty_generic() => {}
                        _ => return err("`segments` is not a list of segment dicts"),
                    }
                }
                K_DEVICE_TRACES => {
                    let outer = match self.take_list(v, "`device_traces`")? {
                        ListRepr::Generic(v) => v,
                        _ => return err("`device_traces` is not a list of per-device lists"),
                    };
                    for dev in outer {
                        match self.take_list(dev, "`device_traces[i]`")? {
                            ListRepr::Events(r) => traces.push(DeviceTrace {
                                events: r.ring.into(),
                                dropped: r.dropped,
                            }),
                            l if l.is_empty_generic() => traces.push(DeviceTrace::default()),
                            _ => return err("`device_traces[i]` is not a list of trace entries"),
                        }
                    }
                }
                K_ALLOCATOR_SETTINGS => {
                    layout.allocator_settings = true;
                    if let Some(r) = self.peek(v).as_obj()
                        && let Some(Body::Dict(items)) = self.slot_of(r).map(|s| &s.body)
                    {
                        for &(k, v) in items {
                            settings.push((self.display(k, 0), self.display(v, 0)));
                        }
                    }
                }
                K_EXTERNAL_ANNOTATIONS => {
                    layout.external_annotations = true;
                    annotations = self.annotations(v);
                }
                _ => {}
            }
        }
        if !have_segments {
            return err("not a PyTorch memory snapshot: the top-level dict has no `segments`");
        }
        layout.shared_records = self.retain;
        layout.time_us = self.seen.time_us;
        layout.compile_context = self.seen.compile_context;
        layout.user_metadata = self.seen.user_metadata;
        layout.legacy_history = self.seen.history;
        layout.pending_free_state_name = self
            .seen
            .pending_name
            .map(|s| self.strings.get(s).to_string());
        Ok(Snapshot {
            strings: self.strings,
            frames: self.frames,
            stacks: self.stacks,
            segments,
            traces,
            allocator_settings: settings,
            annotations,
            layout,
            file_bytes,
            read_ahead_events: 0,
        })
    }
}
