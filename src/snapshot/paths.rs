//! File names as the snapshot writes them, read the same on every platform: a frame
//! from Windows is `C:\venv\Lib\site-packages\torch\nn\modules\module.py`, one from
//! Linux `/venv/lib/python3.11/site-packages/torch/nn/modules/module.py`. Every table
//! and glob is written with `/`; [`normalize`] gives a file name in that form (the
//! report still shows the name as written).

use std::borrow::Cow;

use super::frames::{LIBRARY_DIRS, STDLIB_MODULES};

/// The file name with `\` read as `/` (borrowed when it has none).
pub fn normalize(file: &str) -> Cow<'_, str> {
    if file.contains('\\') {
        Cow::Owned(file.replace('\\', "/"))
    } else {
        Cow::Borrowed(file)
    }
}

/// A Windows path: a drive letter (`C:/`, `c:\`) or a UNC share (`\\host\share`).
fn windows_shaped(raw: &str) -> bool {
    let b = raw.as_bytes();
    raw.starts_with("\\\\")
        || (b.len() >= 3
            && b[0].is_ascii_alphabetic()
            && b[1] == b':'
            && matches!(b[2], b'/' | b'\\'))
}

/// Glob match: `*` matches any run of characters (slashes included), `?` one character.
pub fn glob_match(pat: &[u8], s: &[u8]) -> bool {
    let (mut p, mut i) = (0usize, 0usize);
    let (mut star, mut mark) = (usize::MAX, 0usize);
    while i < s.len() {
        if p < pat.len() && (pat[p] == b'?' || pat[p] == s[i]) {
            p += 1;
            i += 1;
        } else if p < pat.len() && pat[p] == b'*' {
            star = p;
            mark = i;
            p += 1;
        } else if star != usize::MAX {
            p = star + 1;
            mark += 1;
            i = mark;
        } else {
            return false;
        }
    }
    while p < pat.len() && pat[p] == b'*' {
        p += 1;
    }
    p == pat.len()
}

/// A pattern matches a path when it matches the whole path or any part of it that
/// starts after a separator (so `torch/optim/*` matches `/venv/.../torch/optim/adam.py`
/// and `C:\venv\...\torch\optim\adam.py`). Either separator may be used in the pattern
/// and in the path.
pub fn glob_match_path(pat: &str, path: &str) -> bool {
    let (pat, path) = (normalize(pat), normalize(path));
    let (p, s) = (pat.as_bytes(), path.as_bytes());
    if glob_match(p, s) {
        return true;
    }
    if p.first() == Some(&b'/') {
        return false;
    }
    s.iter()
        .enumerate()
        .filter(|&(_, &c)| c == b'/')
        .any(|(i, _)| glob_match(p, &s[i + 1..]))
}

/// The installed package a file belongs to: the folder after `site-packages/` or
/// `dist-packages/` (`transformers` for `.../site-packages/transformers/models/...`),
/// a single-file module without its `.py`.
pub fn installed_package(file: &str) -> Option<String> {
    let n = normalize(file);
    let lower = n.to_ascii_lowercase();
    LIBRARY_DIRS.iter().find_map(|dir| {
        let i = lower.rfind(dir)?;
        let rest = &n[i + dir.len()..];
        let top = rest.split('/').next().filter(|t| !t.is_empty())?;
        Some(top.strip_suffix(".py").unwrap_or(top).to_string())
    })
}

/// Standard-library files: `/usr/lib/python3.11/runpy.py`, a conda env's
/// `.../envs/x/lib/python3.11/threading.py`, Windows' `C:\Python311\Lib\copy.py` or
/// uv's `...\cpython-3.10.19-windows-x86_64-none\lib\copy.py`, and frozen modules
/// (`<frozen runpy>`). Never the user's code, unlike the site-packages next to them.
pub fn is_stdlib(file: &str) -> bool {
    if file.starts_with("<frozen ") {
        return true;
    }
    let n = normalize(file);
    let lower = n.to_ascii_lowercase();
    if LIBRARY_DIRS.iter().any(|d| lower.contains(d)) {
        return false;
    }
    if lower.contains("/lib/python3") || lower.contains("/lib/python2") {
        return true;
    }
    // Windows installs have no version folder: `Lib\<module>`.
    if !windows_shaped(file) {
        return false;
    }
    let Some(i) = lower.rfind("/lib/") else {
        return false;
    };
    let top = n[i + 5..].split('/').next().unwrap_or("");
    let top = top.strip_suffix(".py").unwrap_or(top);
    STDLIB_MODULES.binary_search(&top).is_ok()
}

/// The last two path components: enough to recognise a file in prose.
pub fn short(path: &str) -> String {
    let parts: Vec<&str> = path.rsplitn(3, ['/', '\\']).collect();
    if parts.len() >= 3 {
        let sep = if path.contains('/') { '/' } else { '\\' };
        format!("{}{sep}{}", parts[1], parts[0])
    } else {
        path.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_with_either_separator() {
        assert!(glob_match_path(
            "torch/optim/*",
            "/venv/lib/torch/optim/adam.py"
        ));
        assert!(glob_match_path(
            "torch/optim/*",
            r"C:\venv\Lib\site-packages\torch\optim\adam.py"
        ));
        assert!(glob_match_path(
            r"cezo_fl\util\*",
            r"C:\research\DeComFL\cezo_fl\util\language_utils.py"
        ));
        assert!(glob_match_path("torch/*", "torch/nn/functional.py"));
        assert!(!glob_match_path("torch/*", "/home/me/mytorch/x.py"));
        assert!(!glob_match_path("torch/*", r"C:\home\mytorch\x.py"));
        assert!(glob_match_path("*/vendor/*.py", "/a/vendor/b.py"));
        assert!(!glob_match_path("/abs/*", "/x/abs/y.py"));
        assert!(glob_match_path("model?.py", "/src/model1.py"));
        assert!(!glob_match_path("model?.py", "/src/model12.py"));
    }

    #[test]
    fn packages_and_stdlib() {
        assert_eq!(
            installed_package(
                r"C:\research\DeComFL\.venv\lib\site-packages\transformers\models\opt\modeling_opt.py"
            )
            .as_deref(),
            Some("transformers")
        );
        assert_eq!(
            installed_package("/usr/lib/python3/dist-packages/einops/einops.py").as_deref(),
            Some("einops")
        );
        assert_eq!(
            installed_package("/venv/lib/python3.11/site-packages/six.py").as_deref(),
            Some("six")
        );
        assert_eq!(installed_package("/src/train.py"), None);
        assert!(is_stdlib("/usr/lib/python3.11/runpy.py"));
        assert!(is_stdlib(
            r"C:\Users\Z\AppData\Roaming\uv\python\cpython-3.10.19-windows-x86_64-none\lib\copy.py"
        ));
        assert!(is_stdlib(r"C:\Python311\Lib\concurrent\futures\thread.py"));
        assert!(is_stdlib("<frozen runpy>"));
        assert!(!is_stdlib(r"C:\research\proj\lib\model.py"));
        assert!(!is_stdlib("/home/me/proj/lib/copy.py"));
        assert!(!is_stdlib(
            "/venv/lib/python3.11/site-packages/flash_attn/x.py"
        ));
        assert!(!is_stdlib(
            r"C:\venv\Lib\site-packages\torch\nn\functional.py"
        ));
        assert!(!is_stdlib("/src/train.py"));
    }

    #[test]
    fn short_names() {
        assert_eq!(short("/a/b/c/d.py"), "c/d.py");
        assert_eq!(short(r"C:\r\cezo_fl\client.py"), r"cezo_fl\client.py");
        assert_eq!(short("x.py"), "x.py");
    }
}
