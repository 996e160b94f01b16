//! `--html FILE`: one self-contained page (inline SVG, CSS and a short script;
//! nothing loaded from the network). What people open memory_viz for, pre-aggregated
//! so that the page stays small for any snapshot: live memory over time stacked by
//! the largest sites (hover: site, size, stack), the blocks over time of the largest
//! segments, the ranks of a run on one y-scale, a diff first; then the report's tables.

use std::fmt::Write;

use super::charts::{self, Frame, cat_color, esc};
use super::{Oom, Report, human, short, signed_human};
use crate::page::table::Table;
use crate::page::{Page, Tips};
use crate::snapshot::frames::short_function;
use crate::snapshot::sites::Origin;

/// What only this page draws: the cards, the patterns and the OOM's why, the ranks side by
/// side, the blocks over time; the page is as wide as its charts.
const STYLE: &str = "body{max-width:1000px}table{width:100%}\
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:12px 0}.card{border:1px solid #ddd;border-radius:6px;padding:8px 12px;min-width:120px}.card b{display:block;font-size:18px}\
.pat{border-left:4px solid #e15759;padding:4px 12px;margin:10px 0;background:#fafafa}.why{border-left:4px solid #d00;background:#fff4f4;padding:6px 12px;margin:10px 0}\
svg .tick{fill:#555}svg .axis{fill:#777;font-size:10px}\
.ranks{display:grid;grid-template-columns:1fr 1fr;gap:12px}.rank{border:1px solid #ddd;border-radius:6px;padding:6px}.rank.standout{border:2px solid #e15759;background:#fff8f8}\
svg.history rect[data-l]{stroke:#fff;stroke-width:.5}";

/// Hover over the timelines and the blocks over time (the kit's `tip` and `untip` show and
/// hide the tooltip): the timeline's cursor and band, a block's site and lifetime.
/// `#hover=X,Y` (fractions of the first timeline's plot) shows a tip at load, for tests.
const SCRIPT: &str = r#"(function(){
var place=window.tip,hide=window.untip;
function B(b){var u=['B','KiB','MiB','GiB','TiB'],i=0;while(b>=1024&&i<u.length-1){b/=1024;i++;}return i?b.toFixed(2)+' '+u[i]:b+' B';}
function pt(svg,e){var r=svg.getBoundingClientRect(),vb=svg.viewBox.baseVal;return {x:(e.clientX-r.left)*vb.width/r.width,y:(e.clientY-r.top)*vb.height/r.height};}
function data(svg){var n=document.getElementById(svg.getAttribute('data-id')+'-data');return n?JSON.parse(n.textContent):null;}
function showTimeline(svg,d,p,cx,cy){
 var n=d.x.length,j=Math.round((p.x-d.ml)/d.pw*(n-1));if(j<0||j>=n){hide();return;}
 var cur=svg.querySelector('.cursor'),x=d.ml+j*d.pw/Math.max(n-1,1);cur.setAttribute('x1',x);cur.setAttribute('x2',x);cur.setAttribute('visibility','visible');
 var v=(d.mt+d.ph-p.y)/d.ph*d.ymax,acc=0,hit=null,t=d.x[j]+'\nlive '+B(d.total[j]);
 for(var k=0;k<d.series.length;k++){acc+=d.series[k].v[j];if(v<=acc){hit=d.series[k];break;}}
 if(hit){t+='\n\n'+hit.label+' ('+hit.cat+'): '+B(hit.v[j])+'\n  '+hit.stack.join('\n  ');}
 else if(d.other.length&&v<=acc+d.other[j]){t+='\n\nother sites: '+B(d.other[j]);}
 place(cx,cy,t);}
document.querySelectorAll('svg.timeline').forEach(function(svg){var d=data(svg);if(!d)return;
 svg.addEventListener('mousemove',function(e){showTimeline(svg,d,pt(svg,e),e.clientX,e.clientY);});
 svg.addEventListener('mouseleave',function(){hide();svg.querySelector('.cursor').setAttribute('visibility','hidden');});});
document.querySelectorAll('svg.history').forEach(function(svg){var d=data(svg);if(!d)return;
 svg.addEventListener('mousemove',function(e){var a=e.target;if(!a.getAttribute('data-l')){hide();return;}
  var tt=a.getAttribute('data-t').split('|');place(e.clientX,e.clientY,d.labels[+a.getAttribute('data-l')]+'\n'+B(+a.getAttribute('data-b'))+', '+tt[0]+' to '+tt[1]);});
 svg.addEventListener('mouseleave',hide);});
window.addEventListener('load',function(){
 var m=/hover=([0-9.]+),([0-9.]+)/.exec(location.hash),svg=document.querySelector('svg.timeline');
 if(m&&svg){var d=data(svg);showTimeline(svg,d,{x:d.ml+(+m[1])*d.pw,y:d.mt+(1-(+m[2]))*d.ph},40,40);}});
})();"#;

/// 1234567 -> "1,234,567".
fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn site_label(file: &str, line: i64, function: &str) -> String {
    if function.is_empty() {
        file.to_string()
    } else {
        format!("{}:{line} in {}", short(file), short_function(function))
    }
}

fn cards(o: &mut String, r: &Report) {
    let t = &r.totals;
    let peak = r.trace.peak_live_bytes.max(t.allocated_bytes);
    let mut items = vec![
        ("reserved", human(t.reserved_bytes)),
        ("live now", human(t.allocated_bytes)),
        ("peak live (trace)", human(peak)),
        (
            "cached, free",
            format!(
                "{} ({:.0}%)",
                human(t.inactive_bytes),
                t.inactive_fraction * 100.0
            ),
        ),
        (
            "fragmented",
            format!(
                "{} ({:.0}%)",
                human(t.fragmented_bytes),
                t.fragmentation_fraction * 100.0
            ),
        ),
        ("trace entries", thousands(r.trace.total_events)),
    ];
    if !r.oom.is_empty() {
        items.push(("OOMs", r.oom.len().to_string()));
    }
    o.push_str("<div class=\"cards\">");
    for (k, v) in items {
        let _ = write!(
            o,
            "<div class=\"card\"><span class=\"muted\">{}</span><b>{}</b></div>",
            esc(k),
            esc(&v)
        );
    }
    o.push_str("</div>");
}

fn diff_section(o: &mut String, r: &Report) {
    let Some(d) = &r.diff else { return };
    let _ = write!(
        o,
        "<h2>What changed</h2><p><code>{}</code> &rarr; <code>{}</code>: live {} &rarr; {} ({}), reserved {} &rarr; {}.</p>",
        esc(&d.before.path),
        esc(&d.after.path),
        esc(&human(d.totals_before.allocated_bytes)),
        esc(&human(d.totals_after.allocated_bytes)),
        esc(&signed_human(
            d.totals_after.allocated_bytes as i64 - d.totals_before.allocated_bytes as i64
        )),
        esc(&human(d.totals_before.reserved_bytes)),
        esc(&human(d.totals_after.reserved_bytes))
    );
    charts::diff_svg(o, d);
    let mut t = Table::new(
        o,
        "",
        &[
            ("verdict", false),
            ("change", true),
            ("blocks", true),
            ("bytes", true),
            ("site", false),
            ("category", false),
        ],
    );
    for s in &d.sites {
        t.row(&[
            s.verdict.replace('_', "-"),
            signed_human(s.delta_bytes),
            format!("{} → {}", s.blocks_before, s.blocks_after),
            format!("{} → {}", human(s.bytes_before), human(s.bytes_after)),
            site_label(&s.file, s.line, &s.function),
            s.category.name().into(),
        ]);
    }
    t.end();
    let _ = write!(
        o,
        "<p class=\"muted\">{} site(s) unchanged. The sections below describe the later snapshot.</p>",
        d.unchanged_sites
    );
}

fn ranks_section(o: &mut String, r: &Report) {
    if r.ranks.is_empty() {
        return;
    }
    o.push_str("<h2>Ranks</h2>");
    // One y-scale for every rank, so the rank that stands out looks different.
    let y_max = r
        .rank_timelines
        .iter()
        .map(|(_, tl)| tl.peak())
        .chain(r.ranks.iter().map(|x| x.peak_bytes))
        .max()
        .unwrap_or(0);
    if !r.rank_timelines.is_empty() {
        let _ = write!(
            o,
            "<p class=\"muted\">Live memory over time on each rank, all on one scale (0 to {}).</p><div class=\"ranks\">",
            esc(&human(y_max))
        );
        for (rank, tl) in &r.rank_timelines {
            let info = r.ranks.iter().find(|x| x.rank == *rank);
            let stands = info.is_some_and(|x| x.stands_out);
            let _ = write!(
                o,
                "<div class=\"rank{}\"><b>rank {rank}</b> <span class=\"muted\">peak {}{}</span>",
                if stands { " standout" } else { "" },
                esc(&human(tl.peak())),
                if stands {
                    format!(" — {}", esc(&info.map(standing).unwrap_or_default()))
                } else {
                    String::new()
                }
            );
            charts::timeline_svg(
                o,
                tl,
                &format!("rank{rank}"),
                &Frame::new(470.0, 150.0),
                y_max,
                false,
            );
            o.push_str("</div>");
        }
        o.push_str("</div>");
    }
    let mut t = Table::new(
        o,
        "",
        &[
            ("rank", true),
            ("peak", true),
            ("live", true),
            ("reserved", true),
            ("OOMs", true),
            ("file", false),
            ("compared within", false),
        ],
    );
    for x in &r.ranks {
        t.row(&[
            x.rank.to_string(),
            human(x.peak_bytes),
            human(x.allocated_bytes),
            human(x.reserved_bytes),
            x.ooms.to_string(),
            x.file.clone(),
            standing(x),
        ]);
    }
    t.end();
    let mut t = Table::new(o, "", &[("file", false), ("rank", true), ("note", false)]);
    for f in &r.rank_files {
        t.row(&[
            f.file.clone(),
            f.rank.map(|r| r.to_string()).unwrap_or_default(),
            f.note.clone(),
        ]);
    }
    t.end();
}

/// Whom a rank was compared with, and how it stood.
fn standing(x: &super::RankRow) -> String {
    match (&x.peers, x.peers_median_peak_bytes) {
        (Some(p), Some(m)) => format!("{p}: stands out, against the median peak {}", human(m)),
        (Some(p), None) => p.clone(),
        (None, _) => "no rank: its stage and role are unknown from snapshots alone".into(),
    }
}

fn oom_detail(o: &mut String, i: usize, oom: &Oom) {
    let _ = write!(
        o,
        "<h3>OOM #{}{}: {} requested at <code>{}</code></h3><p>{} free on the device, stream {:#x}, {} live just before.</p><div class=\"why\"><b>Why:</b> {}</div>",
        i + 1,
        oom.rank.map(|r| format!(" (rank {r})")).unwrap_or_default(),
        esc(&human(oom.size_bytes)),
        esc(&oom.site.label()),
        esc(&human(oom.device_free_bytes)),
        oom.stream,
        esc(&human(oom.live_bytes_before)),
        esc(&oom.why)
    );
    o.push_str("<p class=\"muted\">The failing allocation's frames, innermost first:</p><ol>");
    for f in oom.frames.iter().take(16) {
        let _ = write!(
            o,
            "<li><code>{}</code></li>",
            esc(&format!(
                "{}:{} in {}",
                f.file,
                f.line,
                short_function(&f.function)
            ))
        );
    }
    o.push_str("</ol>");
    let mut t = Table::new(
        o,
        "",
        &[
            ("holding just before", false),
            ("bytes", true),
            ("blocks", true),
            ("category", false),
        ],
    );
    for h in &oom.holders {
        t.row(&[
            site_label(&h.file, h.line, &h.function),
            human(h.bytes),
            h.blocks.to_string(),
            h.category.name().into(),
        ]);
    }
    t.end();
}

fn tables(o: &mut String, r: &Report) {
    o.push_str("<h2>Totals</h2>");
    let totals = &r.totals;
    let mut t = Table::new(o, "", &[("", false), ("bytes", true), ("blocks", true)]);
    for (name, b, n) in [
        (
            "reserved (segments)",
            totals.reserved_bytes,
            totals.segments,
        ),
        (
            "live (active_allocated)",
            totals.allocated_bytes,
            totals.allocated_blocks,
        ),
        (
            "delayed frees (active_pending_free)",
            totals.pending_free_bytes,
            totals.pending_free_blocks,
        ),
        (
            "inactive cached",
            totals.inactive_bytes,
            totals.inactive_blocks,
        ),
    ] {
        t.row(&[name.into(), human(b), n.to_string()]);
    }
    t.row(&[
        "requested / rounding waste".into(),
        human(totals.requested_bytes),
        human(totals.rounding_waste_bytes),
    ]);
    t.row(&[
        "largest inactive block / inactive share of reserved".into(),
        human(totals.largest_inactive_block_bytes),
        format!("{:.1}%", totals.inactive_fraction * 100.0),
    ]);
    if totals.expandable_segments > 0 {
        t.row(&[
            "inactive in expandable segments: mapped pages, free (not fragmentation)".into(),
            human(totals.expandable_inactive_bytes),
            format!("{} segment(s)", totals.expandable_segments),
        ]);
    }
    t.row(&[
        "fragmented: free inside segments that hold live blocks".into(),
        human(totals.fragmented_bytes),
        format!("{:.1}%", totals.fragmentation_fraction * 100.0),
    ]);
    t.row(&[
        "torch.cuda.empty_cache() would return".into(),
        human(totals.reclaimable_bytes),
        String::new(),
    ]);
    t.end();
    if totals.expandable_segments > 0 {
        o.push_str("<p class=\"muted\">Expandable segments: each segment above is one mapped range, so reserved is the memory mapped; the address space reserved around it is not memory. Their free pages stay mapped until an allocation needs them or <code>torch.cuda.empty_cache()</code> runs: cached, not fragmentation.</p>");
    }
    if !r.streams.is_empty() {
        let mut t = Table::new(
            o,
            "",
            &[
                ("stream", false),
                ("reserved", true),
                ("live", true),
                ("delayed frees", true),
                ("inactive", true),
                ("segments", true),
            ],
        );
        for s in &r.streams {
            t.row(&[
                format!("{:#x}", s.stream),
                human(s.totals.reserved_bytes),
                human(s.totals.allocated_bytes),
                human(s.totals.pending_free_bytes),
                human(s.totals.inactive_bytes),
                s.totals.segments.to_string(),
            ]);
        }
        t.end();
    }
    let _ = write!(
        o,
        "<h2>Where live memory goes</h2><p class=\"muted\">Top {} of {} sites: the first frame in user code, else past the allocator's and interpreter's frames.</p>",
        r.sites.len(),
        r.sites_total
    );
    let mut t = Table::new(
        o,
        "",
        &[
            ("bytes", true),
            ("% live", true),
            ("blocks", true),
            ("category", false),
            ("site", false),
            ("called from", false),
        ],
    );
    for s in &r.sites {
        t.row_with(
            "",
            [
                esc(&human(s.bytes)),
                format!("{:.1}%", s.percent),
                s.blocks.to_string(),
                format!(
                    "<i style=\"display:inline-block;width:9px;height:9px;background:{}\"></i> {}",
                    cat_color(s.category),
                    s.category.name()
                ),
                esc(&match (&s.library, s.origin) {
                    (Some(l), Origin::User) => format!(
                        "{}, called from {}",
                        l.label(),
                        site_label(&s.file, s.line, &s.function)
                    ),
                    (_, Origin::Library) => format!(
                        "{} (no user frame; library)",
                        site_label(&s.file, s.line, &s.function)
                    ),
                    _ => site_label(&s.file, s.line, &s.function),
                }),
                format!(
                    "<span class=\"muted\">{}</span>",
                    esc(&s
                        .stack
                        .iter()
                        .skip(1)
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(" ← "))
                ),
            ],
        );
    }
    t.end();
    if let Some(n) = &r.no_stack {
        let _ = write!(
            o,
            "<div class=\"why\"><b>No stack: {} ({}% of live) in {} block(s).</b> {}. <b>Fix:</b> {}.</div>",
            esc(&human(n.bytes)),
            n.percent,
            n.blocks,
            esc(&n.meaning),
            esc(&n.fix)
        );
    }
    if r.trace.present {
        let tr = &r.trace;
        let _ = write!(
            o,
            "<h2>Trace</h2><p>{} entries analysed, {} older dropped. Peak live {}; reserved {} at the start, peak {}.</p>",
            tr.kept_events,
            tr.dropped,
            esc(&human(tr.peak_live_bytes)),
            esc(&human(tr.reserved_at_start_bytes)),
            esc(&human(tr.peak_reserved_bytes))
        );
        if let Some(st) = &tr.steps {
            let _ = write!(o, "<p><b>Steps: {}</b>, {}.</p>", st.count, esc(&st.note));
        }
        let mut t = Table::new(o, "", &[("action", false), ("count", true)]);
        for (k, v) in tr.counts.iter().filter(|(_, v)| **v > 0) {
            t.row(&[k.clone(), v.to_string()]);
        }
        t.end();
        if !tr.pending_frees.is_empty() {
            let mut t = Table::new(
                o,
                "",
                &[
                    ("frees requested, not completed: stream", false),
                    ("blocks", true),
                    ("bytes", true),
                ],
            );
            for p in &tr.pending_frees {
                t.row(&[
                    format!("{:#x}", p.stream),
                    p.blocks.to_string(),
                    human(p.bytes),
                ]);
            }
            t.end();
        }
        if !tr.repeated_unfreed.is_empty() {
            let mut t = Table::new(
                o,
                "",
                &[
                    ("allocated every step, never freed", false),
                    ("steps", true),
                    ("blocks", true),
                    ("bytes", true),
                ],
            );
            for u in &tr.repeated_unfreed {
                t.row(&[
                    site_label(&u.file, u.line, &u.function),
                    format!("{} of {}", u.steps_with_unfreed, u.steps),
                    u.blocks.to_string(),
                    human(u.bytes),
                ]);
            }
            t.end();
        }
    }
}

pub fn render(r: &Report) -> String {
    let mut o = Page::new(
        &format!("instrument snapshot: {}", r.source.path),
        STYLE,
        Tips::Script,
    );
    let _ = write!(
        o,
        "<h1>Memory snapshot: <code>{}</code></h1><p class=\"muted\">{} &middot; {} &middot; {}</p>",
        esc(&r.source.path),
        esc(&r.source.layout.format),
        esc(&human(r.source.file_bytes)),
        esc(&r.device_note)
    );
    // The findings first (an OOM leads them), then the detail.
    crate::findings::html::render(&mut o, &r.findings);
    if let Some(g) = &r.gate {
        g.render_html(&mut o);
    }
    cards(&mut o, r);
    diff_section(&mut o, r);
    ranks_section(&mut o, r);
    for oom in &r.oom {
        let _ = write!(
            o,
            "<div class=\"why\"><b>OOM: {} requested.</b> {}</div>",
            esc(&human(oom.size_bytes)),
            esc(&oom.why)
        );
    }
    if !r.patterns.is_empty() {
        o.push_str("<h2>Patterns</h2>");
        for p in &r.patterns {
            let _ = write!(
                o,
                "<div class=\"pat\"><b>{}</b> <code>{}</code><ul>",
                esc(&p.title),
                esc(&p.name)
            );
            for e in &p.evidence {
                let _ = write!(o, "<li>{}</li>", esc(e));
            }
            let _ = write!(o, "</ul><p><b>Fix:</b> {}</p></div>", esc(&p.fix));
        }
    }
    if let Some(tl) = &r.timeline {
        let _ = write!(
            o,
            "<h2>Live memory over time</h2><p class=\"muted\">{} trace entries, stacked by the {} sites holding the most at the peak; dashed lines start steps ({}), red lines are OOMs. Hover for the site, its size and its stack.</p>",
            thousands(tl.events),
            tl.series.len(),
            esc(&r
                .trace
                .steps
                .as_ref()
                .map(|s| if s.guess {
                    "a guess: the run marked none".to_string()
                } else if s.from_run {
                    "marked by the run".to_string()
                } else {
                    "none found".to_string()
                })
                .unwrap_or_default())
        );
        charts::timeline_svg(
            &mut o,
            tl,
            "tl0",
            &Frame::new(960.0, 320.0),
            tl.peak(),
            true,
        );
        charts::series_legend(&mut o, tl);
        if let Some(ps) = &r.peak_step {
            let _ = write!(
                o,
                "<h3>The step with the peak, in detail</h3><p class=\"muted\">{} trace entries from the start of the step that reached {}, stacked by its own largest sites.</p>",
                thousands(ps.events),
                esc(&human(ps.peak()))
            );
            charts::timeline_svg(
                &mut o,
                ps,
                "tl1",
                &Frame::new(960.0, 260.0),
                ps.peak(),
                true,
            );
            charts::series_legend(&mut o, ps);
        }
        let hist_tl = r.peak_step.as_ref().unwrap_or(tl);
        if !r.history.is_empty() {
            let _ = write!(
                o,
                "<h2>Blocks over time in the busiest segments</h2><p class=\"muted\">{}: one rectangle per allocation, from its alloc to its free, at its offset in the segment; the colors are the timeline's. Gaps between live blocks are cached memory that only a request of their size can reuse.</p>",
                if r.peak_step.is_some() {
                    "Over the step with the peak"
                } else {
                    "Over the trace"
                }
            );
            for (k, h) in r.history.iter().enumerate() {
                let _ = write!(
                    o,
                    "<h3>segment {:#x}: {} on stream {:#x}{}</h3>",
                    h.address,
                    esc(&human(h.total_size)),
                    h.stream,
                    if h.blocks.len() < h.total_blocks {
                        format!(
                            " <span class=\"muted\">({} of {} blocks drawn)</span>",
                            h.blocks.len(),
                            h.total_blocks
                        )
                    } else {
                        String::new()
                    }
                );
                charts::history_svg(&mut o, h, hist_tl, &format!("h{k}"));
            }
        }
    }
    tables(&mut o, r);
    if !r.oom.is_empty() {
        o.push_str("<h2>OOMs</h2>");
        for (i, oom) in r.oom.iter().enumerate() {
            oom_detail(&mut o, i, oom);
        }
    }
    if !r.segment_map.is_empty() {
        let _ = write!(
            o,
            "<h2>Segment map at the end</h2><p class=\"muted\">{} segment(s) on device {}, blocks in address order (the largest 200 segments are drawn).</p>",
            r.totals.segments,
            r.device.unwrap_or(0)
        );
        charts::segment_map_svg(&mut o, &r.segment_map);
    }
    o.finish(SCRIPT)
}
