//! Container operations (SETITEMS, APPENDS and friends) and folding completed
//! containers into the snapshot's records.

use super::keys::*;
use super::*;

/// A list item once folded.
pub(crate) enum Item {
    Value(PV),
    Frame(FrameId),
    Block(Block),
    Segment(Box<Segment>),
    Event(Event),
    History(u64, StackId),
}

impl Item {
    fn kind(&self) -> &'static str {
        match self {
            Item::Value(_) => "other values",
            Item::Frame(_) => "frames",
            Item::Block(_) => "blocks",
            Item::Segment(_) => "segments",
            Item::Event(_) => "trace entries",
            Item::History(..) => "history entries",
        }
    }
}

/// What a dict's keys say it is.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Generic,
    Event,
    Segment,
    Block,
    History,
    Frame,
}

impl Builder {
    /// `d[k] = v` (SETITEM).
    pub fn dict_set(&mut self, d: PV, k: PV, v: PV) -> BResult<()> {
        self.dict_set_many(d, &[k, v])
    }

    /// `d.update(pairs)` (SETITEMS). A fresh dict whose first key is `action` is a
    /// trace entry (torch writes `action` first) and is filled in place.
    pub fn dict_set_many(&mut self, d: PV, kv: &[PV]) -> BResult<()> {
        let d = self.peek(d);
        if d.is_missing() {
            return need_retain("SETITEMS");
        }
        let Some(dr) = d.as_obj() else {
            return err(format!(
                "SETITEMS on {}, expected dict",
                self.val(d).type_name()
            ));
        };
        if self.slot_of(dr).is_none() {
            return self.stale();
        }
        for pair in kv.chunks_exact(2) {
            let k = self.resolve(pair[0])?;
            let v = self.resolve(pair[1])?;
            let v = match (k.str_id(), v.as_obj()) {
                (Some(K_FRAMES), Some(r)) if r != dr => self.fold_stack(r, v)?,
                _ => v,
            };
            let idx = dr.id as usize;
            let fresh_entry = matches!(&self.slots[idx].body, Body::Dict(items) if items.is_empty())
                && k.str_id() == Some(K_ACTION);
            if fresh_entry {
                let Body::Dict(items) = std::mem::replace(&mut self.slots[idx].body, Body::Free)
                else {
                    unreachable!("checked")
                };
                self.recycle_dict(items);
                self.slots[idx].body = Body::Event(Self::fresh_event());
            }
            match &mut self.slots[idx].body {
                Body::Event(ev) => {
                    let mut e = *ev;
                    let used = self.apply_event(&mut e, k, v)?;
                    if let Body::Event(ev) = &mut self.slots[idx].body {
                        *ev = e;
                    }
                    if !used {
                        self.discard(v);
                    }
                }
                Body::Dict(items) => items.push((k, v)),
                _ => return err("SETITEMS on a list or tuple, expected dict"),
            }
        }
        Ok(())
    }

    /// `l.extend(values)` (APPENDS).
    pub fn list_extend(&mut self, l: PV, vs: &[PV]) -> BResult<()> {
        let l = self.peek(l);
        if l.is_missing() {
            return need_retain("APPENDS");
        }
        let mut i = 0;
        while i < vs.len() {
            if vs[i].tag() == T_EVENT
                && let Some(lr) = l.as_obj()
            {
                // A run of parked trace entries: into the ring with one lookup.
                let run = vs[i..].iter().take_while(|p| p.tag() == T_EVENT).count();
                self.push_parked(lr, &vs[i..i + run])?;
                i += run;
                continue;
            }
            self.list_append(l, vs[i])?;
            i += 1;
        }
        Ok(())
    }

    fn push_parked(&mut self, lr: ObjRef, parked: &[PV]) -> BResult<()> {
        let first = self.take_parked(parked[0])?;
        self.push_item(lr, Item::Event(first))?;
        let max_events = self.max_events;
        let base = self.pending_base;
        let Body::List(ListRepr::Events(ring)) = &mut self.slots[lr.id as usize].body else {
            unreachable!("push_item made it a list of trace entries")
        };
        for p in &parked[1..] {
            let i = p.payload().wrapping_sub(base) as usize;
            let Some(ev) = self.pending.get_mut(i).and_then(Option::take) else {
                return need_retain("a trace entry");
            };
            self.pending_left -= 1;
            ring.push(ev, max_events);
        }
        Ok(())
    }

    /// `l.append(v)` (APPEND).
    pub fn list_append(&mut self, l: PV, v: PV) -> BResult<()> {
        let l = self.peek(l);
        if l.is_missing() {
            return need_retain("APPEND");
        }
        let Some(lr) = l.as_obj() else {
            return err(format!(
                "APPEND to {}, expected list",
                self.val(l).type_name()
            ));
        };
        if self.slot_of(lr).is_none() {
            return self.stale();
        }
        let v = self.resolve(v)?;
        let item = self.fold_item(v, lr)?;
        self.push_item(lr, item)
    }

    fn push_item(&mut self, lr: ObjRef, item: Item) -> BResult<()> {
        let max_events = self.max_events;
        let Body::List(list) = &mut self.slots[lr.id as usize].body else {
            return err("APPEND to a dict or tuple, expected list");
        };
        if list.is_empty_generic() {
            match &item {
                Item::Frame(_) => *list = ListRepr::Frames(Vec::new()),
                Item::Block(_) => *list = ListRepr::Blocks(Vec::new()),
                Item::Segment(_) => *list = ListRepr::Segments(Vec::new()),
                Item::Event(_) => *list = ListRepr::Events(EventRing::new()),
                Item::History(..) => *list = ListRepr::History(Vec::new()),
                Item::Value(_) => {}
            }
        }
        match (list, item) {
            (ListRepr::Generic(items), Item::Value(v)) => items.push(v),
            (ListRepr::Frames(f), Item::Frame(id)) => f.push(id),
            (ListRepr::Blocks(b), Item::Block(blk)) => b.push(blk),
            (ListRepr::Segments(s), Item::Segment(seg)) => s.push(*seg),
            (ListRepr::Events(ring), Item::Event(ev)) => ring.push(ev, max_events),
            (ListRepr::History(h), Item::History(sz, st)) => h.push((sz, st)),
            (list, item) => {
                return err(format!(
                    "a list of {} also holds {}",
                    list.kind(),
                    item.kind()
                ));
            }
        }
        Ok(())
    }

    /// Fold a list of frames into an interned stack; anything else stays as it is.
    fn fold_stack(&mut self, r: ObjRef, v: PV) -> BResult<PV> {
        let is_frames = match self.slot_of(r).map(|s| &s.body) {
            Some(Body::List(ListRepr::Frames(_))) => true,
            Some(Body::List(l)) => l.is_empty_generic(),
            _ => false,
        };
        if !is_frames {
            return Ok(v);
        }
        let id = match self.take_body(r)? {
            Body::List(ListRepr::Frames(f)) => self.stacks.intern(&f),
            _ => 0,
        };
        let pv = PV::stack(id);
        self.folded(r, pv);
        Ok(pv)
    }

    /// A list item: a folded record when its keys say what it is, else the value.
    fn fold_item(&mut self, v: PV, parent: ObjRef) -> BResult<Item> {
        match v.tag() {
            T_EVENT => return self.take_parked(v).map(Item::Event),
            T_FRAME => return Ok(Item::Frame(v.payload() as FrameId)),
            T_RELEASED | T_DISCARDED => return need_retain("a list item"),
            T_OBJ => {}
            _ => return Ok(Item::Value(v)),
        }
        let r = v.as_obj().expect("obj");
        if r == parent {
            return Ok(Item::Value(v));
        }
        let kind = match self.slot_of(r).map(|s| &s.body) {
            Some(Body::Event(_)) => Kind::Event,
            Some(Body::Dict(items)) => self.kind_of(items),
            Some(_) => return Ok(Item::Value(v)),
            None => return self.stale(),
        };
        if kind == Kind::Generic {
            return Ok(Item::Value(v));
        }
        let body = self.take_body(r)?;
        let item = match (kind, body) {
            (Kind::Event, Body::Event(ev)) => Ok(Item::Event(ev)),
            (_, Body::Dict(items)) => {
                let out = match kind {
                    Kind::Event => self.make_event(&items).map(Item::Event),
                    Kind::Segment => self
                        .make_segment(&items)
                        .map(|s| Item::Segment(Box::new(s))),
                    Kind::Block => self.make_block(&items).map(Item::Block),
                    Kind::History => self.make_history(&items),
                    _ => self.make_frame(&items),
                };
                self.recycle_dict(items);
                out
            }
            _ => err("a list item changed while it was read"),
        }?;
        let replacement = match item {
            Item::Frame(f) => PV::frame(f),
            _ => PV::RELEASED,
        };
        self.folded(r, replacement);
        Ok(item)
    }

    fn kind_of(&self, items: &[(PV, PV)]) -> Kind {
        let mut mask = 0u64;
        for (k, _) in items {
            if let Some(id) = k.str_id()
                && (id as usize) < 64
            {
                mask |= 1 << id;
            }
        }
        let has = |k: StrId| mask & (1 << k) != 0;
        if has(K_ACTION) {
            Kind::Event
        } else if has(K_TOTAL_SIZE) {
            Kind::Segment
        } else if has(K_STATE) && has(K_SIZE) {
            Kind::Block
        } else if has(K_REAL_SIZE) {
            Kind::History
        } else if has(K_FILENAME) && has(K_LINE) && has(K_NAME) {
            Kind::Frame
        } else {
            Kind::Generic
        }
    }

    /// Drop a value nobody needs; a container's contents go with it.
    pub(crate) fn discard(&mut self, v: PV) {
        let mut work = vec![v];
        while let Some(v) = work.pop() {
            if v.tag() == T_EVENT {
                let _ = self.take_parked(v);
                continue;
            }
            let Some(r) = v.as_obj() else { continue };
            if self.slot_of(r).is_none() {
                continue;
            }
            if matches!(self.slots[r.id as usize].body, Body::Forward(_)) {
                let _ = self.resolve(v);
                continue;
            }
            if self.kept(r) {
                self.folded(r, PV::DISCARDED);
                continue;
            }
            match self.take_body(r) {
                Ok(Body::Dict(items)) => {
                    work.extend(items.iter().flat_map(|&(k, v)| [k, v]));
                    self.recycle_dict(items);
                }
                Ok(Body::List(ListRepr::Generic(items))) | Ok(Body::Tuple(items)) => {
                    work.extend(items)
                }
                _ => {}
            }
            self.folded(r, PV::DISCARDED);
        }
    }

    /// Apply one `key: value` of a trace entry; whether the value was used.
    #[inline]
    pub fn apply_event(&mut self, ev: &mut Event, k: PV, v: PV) -> BResult<bool> {
        let Some(k) = k.str_id() else {
            return Ok(false);
        };
        if let Some(i) = v.as_small_int() {
            match k {
                K_ADDR | K_DEVICE_FREE if i >= 0 => {
                    ev.addr = i as u64;
                    return Ok(true);
                }
                K_SIZE if i >= 0 && i as u64 <= MAX_SIZE => {
                    ev.size = i as u64;
                    return Ok(true);
                }
                K_STREAM => {
                    ev.stream = i;
                    return Ok(true);
                }
                K_TIME_US => {
                    ev.time_us = i;
                    self.seen.time_us = true;
                    return Ok(true);
                }
                _ => {}
            }
        }
        match k {
            K_ACTION => match self.val(v) {
                Value::Str(s) => ev.action = self.action(s),
                Value::Released | Value::Discarded => return need_retain("trace entry `action`"),
                other => {
                    return err(format!(
                        "trace entry `action` is {}, expected str",
                        other.type_name()
                    ));
                }
            },
            K_ADDR | K_DEVICE_FREE => {
                ev.addr = self.convert(v, "trace entry address", Conv::U64)?
            }
            K_SIZE => ev.size = self.convert(v, "trace entry `size`", Conv::Size)?,
            K_STREAM => ev.stream = self.convert(v, "trace entry `stream`", Conv::I64)? as i64,
            K_TIME_US => {
                ev.time_us = self.convert(v, "trace entry `time_us`", Conv::I64)? as i64;
                self.seen.time_us = true;
            }
            K_FRAMES => ev.stack = self.stack_of(v, "trace entry")?,
            K_COMPILE_CONTEXT => {
                self.seen.compile_context = true;
                return Ok(false);
            }
            K_USER_METADATA => {
                self.seen.user_metadata = true;
                return Ok(false);
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    fn make_event(&mut self, items: &[(PV, PV)]) -> BResult<Event> {
        let mut ev = Self::fresh_event();
        for &(k, v) in items {
            if !self.apply_event(&mut ev, k, v)? {
                self.discard(v);
            }
        }
        Ok(ev)
    }

    pub(crate) fn stack_of(&self, v: PV, what: &str) -> BResult<StackId> {
        match self.val(v) {
            Value::Stack(s) => Ok(s),
            Value::None => Ok(0),
            Value::Released | Value::Discarded => need_retain(what),
            other => err(format!(
                "{what} `frames` is {}, expected a list of frames",
                other.type_name()
            )),
        }
    }

    fn make_block(&mut self, items: &[(PV, PV)]) -> BResult<Block> {
        let mut b = Block {
            address: None,
            size: 0,
            requested_size: u64::MAX,
            state: BlockState::Inactive,
            stack: 0,
        };
        let mut history = None;
        for &(k, v) in items {
            let Some(k) = k.str_id() else {
                self.discard(v);
                continue;
            };
            match k {
                K_SIZE => b.size = self.convert(v, "block `size`", Conv::Size)?,
                K_REQUESTED_SIZE => {
                    b.requested_size = self.convert(v, "block `requested_size`", Conv::Size)?
                }
                K_ADDRESS => b.address = Some(self.convert(v, "block `address`", Conv::U64)?),
                K_FRAMES => b.stack = self.stack_of(v, "block")?,
                K_STATE => b.state = self.block_state(v)?,
                K_HISTORY => match self.val(v) {
                    Value::Obj(_) => history = Some(v),
                    Value::None => {}
                    Value::Released | Value::Discarded => return need_retain("block `history`"),
                    other => {
                        return err(format!(
                            "block `history` is {}, expected list",
                            other.type_name()
                        ));
                    }
                },
                _ => self.discard(v),
            }
        }
        if let Some(h) = history {
            self.mark_history();
            match self.take_list(h, "block `history`")? {
                ListRepr::History(h) => {
                    // As torch's own viewer does: the first history entry describes the block.
                    if let Some(&(real, stack)) = h.first() {
                        if b.requested_size == u64::MAX {
                            b.requested_size = real;
                        }
                        if b.stack == 0 {
                            b.stack = stack;
                        }
                    }
                }
                l if l.is_empty_generic() => {}
                _ => return err("block `history` is not a list of history entries"),
            }
        }
        if b.requested_size == u64::MAX {
            b.requested_size = b.size;
        }
        Ok(b)
    }

    fn block_state(&mut self, v: PV) -> BResult<BlockState> {
        Ok(match self.val(v) {
            Value::Str(K_ACTIVE_ALLOCATED) => BlockState::Allocated,
            Value::Str(K_INACTIVE) => BlockState::Inactive,
            Value::Str(s @ (K_ACTIVE_PENDING_FREE | K_ACTIVE_AWAITING_FREE)) => {
                self.seen.pending_name = Some(s);
                BlockState::PendingFree
            }
            Value::Str(s) => return err(format!("unknown block state '{}'", self.strings.get(s))),
            Value::Released | Value::Discarded => return need_retain("block `state`"),
            other => {
                return err(format!(
                    "block `state` is {}, expected str",
                    other.type_name()
                ));
            }
        })
    }

    fn make_history(&mut self, items: &[(PV, PV)]) -> BResult<Item> {
        let (mut real, mut stack) = (0, 0);
        for &(k, v) in items {
            match k.str_id() {
                Some(K_REAL_SIZE) => real = self.convert(v, "history `real_size`", Conv::Size)?,
                Some(K_FRAMES) => stack = self.stack_of(v, "history entry")?,
                _ => self.discard(v),
            }
        }
        Ok(Item::History(real, stack))
    }

    fn make_segment(&mut self, items: &[(PV, PV)]) -> BResult<Segment> {
        let mut s = Segment {
            device: 0,
            address: 0,
            total_size: 0,
            stream: 0,
            is_large: None,
            is_expandable: false,
            stack: 0,
            blocks: Vec::new(),
        };
        let mut blocks = None;
        for &(k, v) in items {
            let Some(k) = k.str_id() else {
                self.discard(v);
                continue;
            };
            match k {
                K_DEVICE => s.device = self.convert(v, "segment `device`", Conv::I64)? as i64,
                K_ADDRESS => s.address = self.convert(v, "segment `address`", Conv::U64)?,
                K_TOTAL_SIZE => {
                    s.total_size = self.convert(v, "segment `total_size`", Conv::Size)?
                }
                K_STREAM => s.stream = self.convert(v, "segment `stream`", Conv::I64)? as i64,
                K_SEGMENT_TYPE => {
                    if let Value::Str(t) = self.val(v) {
                        s.is_large = Some(t == K_LARGE);
                    }
                }
                K_IS_EXPANDABLE => s.is_expandable = matches!(self.val(v), Value::Bool(true)),
                K_FRAMES => s.stack = self.stack_of(v, "segment")?,
                K_BLOCKS => blocks = Some(v),
                _ => self.discard(v),
            }
        }
        if let Some(v) = blocks {
            match self.take_list(v, "segment `blocks`")? {
                ListRepr::Blocks(b) => s.blocks = b,
                l if l.is_empty_generic() => {}
                _ => return err("segment `blocks` is not a list of block dicts"),
            }
        }
        let mut addr = s.address;
        for b in &mut s.blocks {
            if b.address.is_none() {
                b.address = Some(addr);
            }
            addr = addr.wrapping_add(b.size);
        }
        Ok(s)
    }

    fn make_frame(&mut self, items: &[(PV, PV)]) -> BResult<Item> {
        let (mut file, mut line, mut name) = (None, 0i64, None);
        for &(k, v) in items {
            match k.str_id() {
                Some(K_FILENAME) => file = Some(self.frame_str(v, "filename")?),
                Some(K_NAME) => name = Some(self.frame_str(v, "name")?),
                Some(K_LINE) => line = self.convert(v, "frame `line`", Conv::I64)? as i64,
                _ => self.discard(v),
            }
        }
        let f = Frame {
            file: file.unwrap_or(0),
            line,
            name: name.unwrap_or(0),
        };
        Ok(Item::Frame(self.intern_frame(f)))
    }

    fn frame_str(&self, v: PV, key: &str) -> BResult<StrId> {
        match self.val(v) {
            Value::Str(s) => Ok(s),
            Value::Released | Value::Discarded => need_retain("a frame"),
            other => err(format!(
                "frame `{key}` is {}, expected str",
                other.type_name()
            )),
        }
    }

    /// Take a list's content (its reference is used up), or fail naming what it is.
    pub(crate) fn take_list(&mut self, v: PV, what: &str) -> BResult<ListRepr> {
        let v = self.resolve(v)?;
        match self.val(v) {
            Value::Obj(r) => {
                if !matches!(self.slot_of(r).map(|s| &s.body), Some(Body::List(_))) {
                    return err(format!("{what} is a dict or tuple, expected list"));
                }
                let Body::List(l) = self.take_body(r)? else {
                    unreachable!("checked")
                };
                self.folded(r, PV::RELEASED);
                Ok(l)
            }
            Value::Stack(0) => Ok(ListRepr::Generic(Vec::new())),
            Value::Released | Value::Discarded => need_retain(what),
            other => err(format!("{what} is {}, expected list", other.type_name())),
        }
    }
}
