//! `--html FILE`: one self-contained page (inline SVG, CSS and a short script;
//! nothing loaded from the network). What people open memory_viz for, pre-aggregated
//! so that the page stays small for any snapshot: live memory over time stacked by
//! the largest sites (hover: site, size, stack), the blocks over time of the largest
//! segments, the ranks of a run on one y-scale, a diff first; then the report's tables.

use std::fmt::Write;

use super::charts::{self, Frame, cat_color, esc};
use super::{Oom, Report, human, short, signed_human};
use crate::snapshot::frames::short_function;
use crate::snapshot::sites::Origin;

const STYLE: &str = "body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;color:#222;max-width:1000px;padding:0 16px}svg{max-width:100%;height:auto;display:block}\
h1{font-size:21px;margin-bottom:4px}h2{font-size:16px;margin-top:30px;border-bottom:1px solid #ddd;padding-bottom:3px}h3{font-size:14px;margin:16px 0 4px}\
table{border-collapse:collapse;margin:8px 0;width:100%}td,th{padding:3px 8px;border-bottom:1px solid #eee;text-align:left;vertical-align:top}\
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}code{font-size:12px}\
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:12px 0}.card{border:1px solid #ddd;border-radius:6px;padding:8px 12px;min-width:120px}.card b{display:block;font-size:18px}\
.pat{border-left:4px solid #e15759;padding:4px 12px;margin:10px 0;background:#fafafa}.why{border-left:4px solid #d00;background:#fff4f4;padding:6px 12px;margin:10px 0}\
.legend{margin:4px 0 8px}.legend span{display:inline-block;margin-right:14px;font-size:12px}.legend i{display:inline-block;width:10px;height:10px;margin-right:4px}\
svg text{font:11px system-ui,sans-serif}svg .tick{fill:#555}svg .axis{fill:#777;font-size:10px}.muted{color:#777}\
.ranks{display:grid;grid-template-columns:1fr 1fr;gap:12px}.rank{border:1px solid #ddd;border-radius:6px;padding:6px}.rank.standout{border:2px solid #e15759;background:#fff8f8}\
svg.history rect[data-l]{stroke:#fff;stroke-width:.5}#tip{position:fixed;pointer-events:none;background:#222;color:#fff;padding:6px 8px;font-size:12px;display:none;border-radius:4px;max-width:520px;z-index:9;white-space:pre-line}";

/// Hover: the timeline's cursor and band, the blocks' and bars' tips. `#hover=X,Y`
/// (fractions of the first timeline's plot) shows a tip at load, for tests.
const SCRIPT: &str = r#"(function(){
var tip=document.getElementById('tip');
function B(b){var u=['B','KiB','MiB','GiB','TiB'],i=0;while(b>=1024&&i<u.length-1){b/=1024;i++;}return i?b.toFixed(2)+' '+u[i]:b+' B';}
function place(x,y,t){tip.textContent=t;tip.style.display='block';tip.style.left=Math.min(x+14,window.innerWidth-540)+'px';tip.style.top=(y+14)+'px';}
function hide(){tip.style.display='none';}
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
document.addEventListener('mousemove',function(e){var t=e.target&&e.target.getAttribute&&e.target.getAttribute('data-tip');if(t)place(e.clientX,e.clientY,t);else if(!e.target.closest||!e.target.closest('svg.timeline,svg.history'))hide();});
window.addEventListener('load',function(){
 var m=/hover=([0-9.]+),([0-9.]+)/.exec(location.hash),svg=document.querySelector('svg.timeline');
 if(m&&svg){var d=data(svg);showTimeline(svg,d,{x:d.ml+(+m[1])*d.pw,y:d.mt+(1-(+m[2]))*d.ph},40,40);}
 var s=document.createElement('div');s.id='render-status';var n=document.querySelectorAll('svg').length;
 s.textContent=window.__errors.length?('render-error: '+window.__errors.join(' | ')):('render-ok svg='+n);s.style.display='none';document.body.appendChild(s);});
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

fn row(out: &mut String, cells: &[String], numeric: &[bool]) {
    out.push_str("<tr>");
    for (i, c) in cells.iter().enumerate() {
        if numeric.get(i).copied().unwrap_or(false) {
            let _ = write!(out, "<td class=\"n\">{}</td>", esc(c));
        } else {
            let _ = write!(out, "<td>{}</td>", esc(c));
        }
    }
    out.push_str("</tr>");
}

fn head(out: &mut String, cells: &[&str], numeric: &[bool]) {
    out.push_str("<table><tr>");
    for (i, c) in cells.iter().enumerate() {
        let class = if numeric.get(i).copied().unwrap_or(false) {
            " class=\"n\""
        } else {
            ""
        };
        let _ = write!(out, "<th{class}>{}</th>", esc(c));
    }
    out.push_str("</tr>");
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
    head(
        o,
        &["verdict", "change", "blocks", "bytes", "site", "category"],
        &[false, true, true, true, false, false],
    );
    for s in &d.sites {
        row(
            o,
            &[
                s.verdict.replace('_', "-"),
                signed_human(s.delta_bytes),
                format!("{} → {}", s.blocks_before, s.blocks_after),
                format!("{} → {}", human(s.bytes_before), human(s.bytes_after)),
                site_label(&s.file, s.line, &s.function),
                s.category.name().into(),
            ],
            &[false, true, true, true, false, false],
        );
    }
    let _ = write!(
        o,
        "</table><p class=\"muted\">{} site(s) unchanged. The sections below describe the later snapshot.</p>",
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
    head(
        o,
        &[
            "rank",
            "peak",
            "live",
            "reserved",
            "OOMs",
            "file",
            "compared within",
        ],
        &[true, true, true, true, true, false, false],
    );
    for x in &r.ranks {
        row(
            o,
            &[
                x.rank.to_string(),
                human(x.peak_bytes),
                human(x.allocated_bytes),
                human(x.reserved_bytes),
                x.ooms.to_string(),
                x.file.clone(),
                standing(x),
            ],
            &[true, true, true, true, true, false, false],
        );
    }
    o.push_str("</table>");
    head(o, &["file", "rank", "note"], &[false, true, false]);
    for f in &r.rank_files {
        row(
            o,
            &[
                f.file.clone(),
                f.rank.map(|r| r.to_string()).unwrap_or_default(),
                f.note.clone(),
            ],
            &[false, true, false],
        );
    }
    o.push_str("</table>");
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
    head(
        o,
        &["holding just before", "bytes", "blocks", "category"],
        &[false, true, true, false],
    );
    for h in &oom.holders {
        row(
            o,
            &[
                site_label(&h.file, h.line, &h.function),
                human(h.bytes),
                h.blocks.to_string(),
                h.category.name().into(),
            ],
            &[false, true, true, false],
        );
    }
    o.push_str("</table>");
}

fn tables(o: &mut String, r: &Report) {
    o.push_str("<h2>Totals</h2>");
    head(o, &["", "bytes", "blocks"], &[false, true, true]);
    let t = &r.totals;
    for (name, b, n) in [
        ("reserved (segments)", t.reserved_bytes, t.segments),
        (
            "live (active_allocated)",
            t.allocated_bytes,
            t.allocated_blocks,
        ),
        (
            "delayed frees (active_pending_free)",
            t.pending_free_bytes,
            t.pending_free_blocks,
        ),
        ("inactive cached", t.inactive_bytes, t.inactive_blocks),
    ] {
        row(
            o,
            &[name.into(), human(b), n.to_string()],
            &[false, true, true],
        );
    }
    row(
        o,
        &[
            "requested / rounding waste".into(),
            human(t.requested_bytes),
            human(t.rounding_waste_bytes),
        ],
        &[false, true, true],
    );
    row(
        o,
        &[
            "largest inactive block / inactive share of reserved".into(),
            human(t.largest_inactive_block_bytes),
            format!("{:.1}%", t.inactive_fraction * 100.0),
        ],
        &[false, true, true],
    );
    if t.expandable_segments > 0 {
        row(
            o,
            &[
                "inactive in expandable segments: mapped pages, free (not fragmentation)".into(),
                human(t.expandable_inactive_bytes),
                format!("{} segment(s)", t.expandable_segments),
            ],
            &[false, true, true],
        );
    }
    row(
        o,
        &[
            "fragmented: free inside segments that hold live blocks".into(),
            human(t.fragmented_bytes),
            format!("{:.1}%", t.fragmentation_fraction * 100.0),
        ],
        &[false, true, true],
    );
    row(
        o,
        &[
            "torch.cuda.empty_cache() would return".into(),
            human(t.reclaimable_bytes),
            String::new(),
        ],
        &[false, true, true],
    );
    o.push_str("</table>");
    if t.expandable_segments > 0 {
        o.push_str("<p class=\"muted\">Expandable segments: each segment above is one mapped range, so reserved is the memory mapped; the address space reserved around it is not memory. Their free pages stay mapped until an allocation needs them or <code>torch.cuda.empty_cache()</code> runs: cached, not fragmentation.</p>");
    }
    if !r.streams.is_empty() {
        head(
            o,
            &[
                "stream",
                "reserved",
                "live",
                "delayed frees",
                "inactive",
                "segments",
            ],
            &[false, true, true, true, true, true],
        );
        for s in &r.streams {
            row(
                o,
                &[
                    format!("{:#x}", s.stream),
                    human(s.totals.reserved_bytes),
                    human(s.totals.allocated_bytes),
                    human(s.totals.pending_free_bytes),
                    human(s.totals.inactive_bytes),
                    s.totals.segments.to_string(),
                ],
                &[false, true, true, true, true, true],
            );
        }
        o.push_str("</table>");
    }
    let _ = write!(
        o,
        "<h2>Where live memory goes</h2><p class=\"muted\">Top {} of {} sites: the first frame in user code, else past the allocator's and interpreter's frames.</p>",
        r.sites.len(),
        r.sites_total
    );
    head(
        o,
        &[
            "bytes",
            "% live",
            "blocks",
            "category",
            "site",
            "called from",
        ],
        &[true, true, true, false, false, false],
    );
    for s in &r.sites {
        let _ = write!(
            o,
            "<tr><td class=\"n\">{}</td><td class=\"n\">{:.1}%</td><td class=\"n\">{}</td><td><i style=\"display:inline-block;width:9px;height:9px;background:{}\"></i> {}</td><td>{}</td><td class=\"muted\">{}</td></tr>",
            esc(&human(s.bytes)),
            s.percent,
            s.blocks,
            cat_color(s.category),
            s.category.name(),
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
            esc(&s
                .stack
                .iter()
                .skip(1)
                .cloned()
                .collect::<Vec<_>>()
                .join(" ← "))
        );
    }
    o.push_str("</table>");
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
        head(o, &["action", "count"], &[false, true]);
        for (k, v) in tr.counts.iter().filter(|(_, v)| **v > 0) {
            row(o, &[k.clone(), v.to_string()], &[false, true]);
        }
        o.push_str("</table>");
        if !tr.pending_frees.is_empty() {
            head(
                o,
                &["frees requested, not completed: stream", "blocks", "bytes"],
                &[false, true, true],
            );
            for p in &tr.pending_frees {
                row(
                    o,
                    &[
                        format!("{:#x}", p.stream),
                        p.blocks.to_string(),
                        human(p.bytes),
                    ],
                    &[false, true, true],
                );
            }
            o.push_str("</table>");
        }
        if !tr.repeated_unfreed.is_empty() {
            head(
                o,
                &[
                    "allocated every step, never freed",
                    "steps",
                    "blocks",
                    "bytes",
                ],
                &[false, true, true, true],
            );
            for u in &tr.repeated_unfreed {
                row(
                    o,
                    &[
                        site_label(&u.file, u.line, &u.function),
                        format!("{} of {}", u.steps_with_unfreed, u.steps),
                        u.blocks.to_string(),
                        human(u.bytes),
                    ],
                    &[false, true, true, true],
                );
            }
            o.push_str("</table>");
        }
    }
}

pub fn render(r: &Report) -> String {
    let mut o = String::new();
    o.push_str("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">");
    let _ = write!(
        o,
        "<title>instrument snapshot: {}</title>",
        esc(&r.source.path)
    );
    o.push_str("<script>window.__errors=[];window.addEventListener('error',function(e){window.__errors.push(String(e.message||e));});</script>");
    let _ = write!(
        o,
        "<style>{STYLE}{}</style></head><body><div id=\"tip\"></div>",
        crate::findings::html::STYLE
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
        let mut t = String::new();
        g.render(&mut t, 10);
        let _ = write!(o, "<h2>Gate</h2><pre>{}</pre>", esc(&t));
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
        charts::legend(&mut o, tl);
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
            charts::legend(&mut o, ps);
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
    let _ = writeln!(o, "<script>{SCRIPT}</script></body></html>");
    o
}
