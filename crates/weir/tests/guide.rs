//! The user guide (`docs/guide/src/`) and the README, held to what weir does.
//!
//! - Every relative link, in README.md and in each chapter, names a file that exists,
//!   and every `#anchor` a heading of it.
//! - Every ```` ```yaml ```` block passes `weir check-config`, unless its info string
//!   says `fragment` (part of a file; the block says where it goes) or `proxy` (another
//!   program's configuration: ingress-nginx's annotations, Traefik's, Envoy's), or the comment
//!   before it names it as a file a console block uses (`<!-- file: NAME -->`). A block
//!   marked `envoy-ratelimit` is an envoyproxy/ratelimit file: it is checked in the
//!   `config_dir` of an `envoy` section. Blocks run beside the entries of `examples/`,
//!   so `plans/api-keys.yaml` is found as the examples find it (`<!-- yaml in: DIR -->`
//!   before a block: beside those of DIR).
//! - Every ```` ```console ```` block is replayed and compared with what weir prints,
//!   as the comment before it says:
//!   - `<!-- console: serve CONFIG[; upstream][; vary: NAME...] -->`: `weir serve` on
//!     CONFIG (from the repository's root; `upstream`: with an app answering `200 ok`
//!     in place of `127.0.0.1:9000`), then each `$ curl ...` sent to it (port 8080 is
//!     its main listener, 9090 its admin one). Compared: the status line, the headers
//!     (all but `content-length` and `date`, in order), and the body (as JSON when it
//!     is JSON). The values of the `vary` fields and headers (times that pass while
//!     the test runs, random ids) are compared with their numbers masked (a header,
//!     a text), or by kind alone (a JSON number or null); an id shown (hex digits)
//!     stands for the real one in later commands.
//!   - `<!-- console: continued -->`: the same server, in the same state, as the
//!     block before in the same file.
//!   - `<!-- console: run -->`: each `$ weir ...` run in a directory holding
//!     `examples/` and the files of `<!-- file: NAME -->` blocks of the same page;
//!     compared: standard output then standard error, line by line.
//!   - `<!-- console: not tested (REASON) -->`: shown, not replayed; the reason says
//!     why (a real Envoy, minutes of build).
//!
//!   A console block with no such comment fails the test: nothing weir prints is
//!   shown unchecked by accident.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a panic is a failure, with its message"
)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{Server, weir};

/// The repository's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// README.md and every Markdown file of the guide, with their text.
fn documents() -> Vec<(PathBuf, String)> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    let root = root();
    let mut paths = vec![root.join("README.md")];
    walk(&root.join("docs/guide/src"), &mut paths);
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            (p, text)
        })
        .collect()
}

/// Where a block or link is, for messages.
fn place(path: &Path, line: usize) -> String {
    let shown = path.strip_prefix(root()).unwrap_or(path);
    format!("{}:{line}", shown.display())
}

/// A fenced code block.
struct Block {
    /// The info string (`yaml fragment`).
    info: String,
    /// Its lines, without the fences.
    text: String,
    /// The line of its opening fence (1-based).
    line: usize,
    /// The HTML comment on the line before it (blank lines skipped), without `<!--`
    /// and `-->`.
    marker: Option<String>,
}

/// The fenced code blocks of a Markdown text (fences of three or more backticks, at
/// any indentation).
fn blocks(text: &str) -> Vec<Block> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let trimmed = lines[i].trim_start();
        let indent = lines[i].len() - trimmed.len();
        let ticks = trimmed.chars().take_while(|&c| c == '`').count();
        if ticks < 3 {
            i += 1;
            continue;
        }
        let info = trimmed[ticks..].trim().to_owned();
        let fence = &trimmed[..ticks];
        let marker = lines[..i]
            .iter()
            .rev()
            .find(|l| !l.trim().is_empty())
            .and_then(|l| {
                l.trim()
                    .strip_prefix("<!--")
                    .and_then(|m| m.strip_suffix("-->"))
            })
            .map(|m| m.trim().to_owned());
        let start = i;
        let mut body = Vec::new();
        i += 1;
        while i < lines.len() && lines[i].trim() != fence {
            let line = lines[i];
            // Lines of an indented block lose the fence's indentation.
            let cut = line.len() - line.trim_start().len();
            body.push(&line[cut.min(indent)..]);
            i += 1;
        }
        i += 1;
        out.push(Block {
            info,
            text: body.join("\n") + "\n",
            line: start + 1,
            marker,
        });
    }
    out
}

/// The text outside code blocks and inline code, line by line (code replaced by
/// blanks, so links inside it are not read).
fn prose(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fence: Option<String> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        let ticks = trimmed.chars().take_while(|&c| c == '`').count();
        if let Some(f) = &fence {
            if trimmed.trim_end() == f {
                fence = None;
            }
            out.push(String::new());
            continue;
        }
        if ticks >= 3 {
            fence = Some(trimmed[..ticks].to_owned());
            out.push(String::new());
            continue;
        }
        // Inline code spans: drop what is between backticks.
        let mut kept = String::new();
        let mut inside = false;
        for c in line.chars() {
            if c == '`' {
                inside = !inside;
            } else if !inside {
                kept.push(c);
            }
        }
        out.push(kept);
    }
    out
}

/// A heading's anchor, as mdBook and GitHub make it: lowercase; letters, digits, `-`
/// and `_` kept, spaces made `-`, the rest dropped (with the backticks of inline code).
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '-' || c == '_' {
                Some(c.to_lowercase().collect::<String>())
            } else if c.is_whitespace() {
                Some("-".to_owned())
            } else {
                None
            }
        })
        .collect()
}

/// The anchors of a Markdown file's headings (a repeated one gets `-1`, `-2`...).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen = BTreeMap::<String, usize>::new();
    let mut out = BTreeSet::new();
    let mut fence = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fence = !fence;
            continue;
        }
        if fence {
            continue;
        }
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if (1..=6).contains(&hashes) && line[hashes..].starts_with(' ') {
            let a = anchor(&line[hashes..]);
            let n = seen.entry(a.clone()).or_insert(0);
            out.insert(if *n == 0 {
                a.clone()
            } else {
                format!("{a}-{n}")
            });
            *n += 1;
        }
    }
    out
}

/// The targets of the inline links `[text](target)` in a line.
fn link_targets(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let Some(end) = after.find(')') else { break };
        out.push(after[..end].trim().to_owned());
        rest = &after[end..];
    }
    out
}

#[test]
fn every_relative_link_and_anchor_exists() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for (path, text) in documents() {
        for (n, line) in prose(&text).iter().enumerate() {
            for target in link_targets(line) {
                // A file of the repository outside the book is linked on GitHub (a
                // relative link would break in the book's HTML): it must exist here.
                let (file, fragment) = if let Some(in_repo) = REPOSITORY
                    .iter()
                    .find_map(|prefix| target.strip_prefix(prefix))
                {
                    let (file, fragment) = split_fragment(in_repo);
                    (root().join(file), fragment)
                } else if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                } else {
                    let (file, fragment) = split_fragment(&target);
                    let file = if file.is_empty() {
                        path.clone()
                    } else {
                        path.parent().unwrap().join(file)
                    };
                    let in_book = path.starts_with(book_src());
                    if in_book && !normalized(&file).starts_with(book_src()) {
                        broken.push(format!(
                            "{}: {target}: leaves the book (broken in its HTML): link it as {}{}",
                            place(&path, n + 1),
                            REPOSITORY[0],
                            "<path from the repository's root>"
                        ));
                        continue;
                    }
                    (file, fragment)
                };
                checked += 1;
                if !file.exists() {
                    broken.push(format!("{}: {target}: no such file", place(&path, n + 1)));
                    continue;
                }
                if let Some(fragment) = fragment {
                    let anchors = if file.extension().is_some_and(|e| e == "md") {
                        anchors(&std::fs::read_to_string(&file).unwrap())
                    } else {
                        BTreeSet::new()
                    };
                    if !anchors.contains(fragment) {
                        broken.push(format!(
                            "{}: {target}: no heading has the anchor #{fragment}",
                            place(&path, n + 1)
                        ));
                    }
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
    assert!(
        checked > 50,
        "only {checked} links found: is the parser right?"
    );
}

/// Where the guide links a file of the repository outside the book: a file, a
/// directory.
const REPOSITORY: [&str; 2] = [
    "https://github.com/weir-rs/weir/blob/main/",
    "https://github.com/weir-rs/weir/tree/main/",
];

/// A link's file and its `#fragment`, if any.
fn split_fragment(target: &str) -> (&str, Option<&str>) {
    match target.split_once('#') {
        Some((file, fragment)) => (file, Some(fragment)),
        None => (target, None),
    }
}

/// The book's chapters.
fn book_src() -> std::path::PathBuf {
    normalized(&root().join("docs/guide/src"))
}

/// `path` with its `..` and `.` taken out (the files need not exist).
fn normalized(path: &Path) -> std::path::PathBuf {
    let mut out = std::path::PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// A directory holding `examples`, and each entry of `examples/` (so that a
/// configuration written there finds `plans/api-keys.yaml` as the examples do).
fn workdir() -> tempfile::TempDir {
    workdir_beside("examples")
}

/// A directory holding `examples`, and each entry of `beside` (a directory of the
/// repository).
fn workdir_beside(beside: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let examples = root().join("examples");
    std::os::unix::fs::symlink(&examples, dir.path().join("examples")).unwrap();
    for entry in std::fs::read_dir(root().join(beside)).unwrap() {
        let entry = entry.unwrap();
        std::os::unix::fs::symlink(entry.path(), dir.path().join(entry.file_name())).unwrap();
    }
    dir
}

/// The admin token `check-config` reads for configurations with an `admin` section.
const ADMIN_TOKEN: &str = "a-token-of-at-least-16-bytes-for-the-guide";

#[test]
fn every_yaml_block_passes_check_config() {
    let mut failures = Vec::new();
    let mut checked = 0;
    for (path, text) in documents() {
        for block in blocks(&text) {
            let mut words = block.info.split_whitespace();
            if words.next() != Some("yaml") {
                continue;
            }
            let words: Vec<&str> = words.collect();
            let is_file = block
                .marker
                .as_deref()
                .is_some_and(|m| m.starts_with("file:"));
            if words.contains(&"fragment") || words.contains(&"proxy") || is_file {
                continue;
            }
            // `<!-- yaml in: DIR -->`: beside the entries of DIR instead.
            let dir = match block
                .marker
                .as_deref()
                .and_then(|m| m.strip_prefix("yaml in:"))
            {
                Some(beside) => workdir_beside(beside.trim()),
                None => workdir(),
            };
            let config = dir.path().join("guide-block.yaml");
            if words.contains(&"envoy-ratelimit") {
                let ratelimit = dir.path().join("guide-ratelimit");
                std::fs::create_dir(&ratelimit).unwrap();
                std::fs::write(ratelimit.join("block.yaml"), &block.text).unwrap();
                std::fs::write(&config, "envoy:\n  config_dir: guide-ratelimit\n").unwrap();
            } else {
                std::fs::write(&config, &block.text).unwrap();
            }
            let out = weir()
                .arg("check-config")
                .arg(&config)
                .current_dir(dir.path())
                .env("WEIR_ADMIN_TOKEN", ADMIN_TOKEN)
                .output()
                .unwrap();
            checked += 1;
            if !out.status.success() {
                failures.push(format!(
                    "{}: {}",
                    place(&path, block.line),
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "yaml blocks that check-config refuses (mark a part of a file `yaml fragment`):\n{}",
        failures.join("\n")
    );
    assert!(checked >= 8, "only {checked} yaml blocks checked");
}

/// An app that answers every request `200 ok`, in place of the examples' upstream.
fn upstream() -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream);
                loop {
                    let mut length = 0;
                    let mut line = String::new();
                    loop {
                        line.clear();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        if line == "\r\n" {
                            break;
                        }
                        if let Some((name, value)) = line.split_once(':')
                            && name.eq_ignore_ascii_case("content-length")
                        {
                            length = value.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0; length];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    let answer = "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 3\r\n\r\nok\n";
                    if reader.get_mut().write_all(answer.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

/// Splits a shell command line into words: single and double quotes, backslashes.
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut any = false;
    let mut chars = line.chars();
    let mut quote: Option<char> = None;
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some('"'), '\\') => {
                if let Some(next) = chars.next() {
                    if !matches!(next, '"' | '\\' | '$' | '`') {
                        word.push('\\');
                    }
                    word.push(next);
                }
            }
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                any = true;
            }
            (None, '\\') => {
                if let Some(next) = chars.next()
                    && next != '\n'
                {
                    word.push(next);
                    any = true;
                }
            }
            (None, c) if c.is_whitespace() => {
                if any || !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                    any = false;
                }
            }
            (None, c) => word.push(c),
        }
    }
    if any || !word.is_empty() {
        words.push(word);
    }
    words
}

/// A command of a console block and the output shown after it.
struct Step {
    command: String,
    shown: Vec<String>,
}

/// The commands of a console block (a command goes on while a quote is open).
fn steps(text: &str) -> Vec<Step> {
    let mut steps: Vec<Step> = Vec::new();
    let mut open = false;
    for line in text.lines() {
        if open {
            let step = steps.last_mut().unwrap();
            step.command.push('\n');
            step.command.push_str(line);
        } else if let Some(command) = line.strip_prefix("$ ") {
            steps.push(Step {
                command: command.to_owned(),
                shown: Vec::new(),
            });
        } else {
            match steps.last_mut() {
                Some(step) => step.shown.push(line.to_owned()),
                None => panic!("a console block's output before any `$ ` command: {line}"),
            }
            continue;
        }
        let command = &steps.last().unwrap().command;
        open = command.chars().filter(|&c| c == '\'').count() % 2 == 1;
    }
    steps
}

/// An HTTP answer.
struct Answer {
    status: String,
    headers: Vec<(String, String)>,
    body: String,
}

/// The servers a console block talks to: port 8080 is the first's main listener, 9090
/// its admin one, 8082 the second's main listener.
fn address(servers: &[Server], port: &str) -> String {
    match port {
        "8080" => servers[0].addr.clone(),
        "9090" => servers[0].admin.clone().expect("no admin listener"),
        "8082" => servers
            .get(1)
            .expect("no second instance (`twice`)")
            .addr
            .clone(),
        other => panic!("port {other} is not a server's"),
    }
}

/// What `curl` prints for the answer: with `-w '%{http_code}...'`, that (the body
/// goes to `-o /dev/null`); with `-i`, the head and the body; else the body.
fn printed(args: &[String], answer: &Answer) -> Option<String> {
    let at = args.iter().position(|a| a == "-w")?;
    let code = answer.status.split(' ').nth(1).unwrap_or_default();
    Some(
        args[at + 1]
            .replace("%{http_code}", code)
            .replace("\\n", "\n"),
    )
}

/// Sends the request `curl ARGS` would send (the flags the guide uses: `-i`, `-s`,
/// `-d`, `-H`, `-X`, `-o`, `-w`) to the servers.
fn curl(servers: &[Server], args: &[String]) -> Answer {
    let mut method = None;
    let mut data = None;
    let mut headers = Vec::new();
    let mut url = None;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "-i" | "-s" | "-si" => {}
            "-d" => data = args.next().cloned(),
            "-H" => headers.push(args.next().unwrap().clone()),
            "-X" => method = args.next().cloned(),
            "-o" | "-w" => {
                args.next();
            }
            other if other.starts_with('-') => panic!("curl flag {other} is not replayed"),
            other => url = Some(other.to_owned()),
        }
    }
    let url = url.expect("curl without a URL");
    let url = url.strip_prefix("http://").unwrap_or(&url);
    let (authority, target) = url.split_at(url.find('/').unwrap_or(url.len()));
    let target = if target.is_empty() { "/" } else { target };
    let addr = address(servers, authority.rsplit(':').next().unwrap());
    let method = method.unwrap_or_else(|| if data.is_some() { "POST" } else { "GET" }.to_owned());
    let mut request = format!(
        "{method} {target} HTTP/1.1\r\nHost: {authority}\r\nUser-Agent: curl/8.5.0\r\nAccept: */*\r\nConnection: close\r\n"
    );
    for header in &headers {
        request.push_str(header);
        request.push_str("\r\n");
    }
    if let Some(data) = &data {
        if !headers
            .iter()
            .any(|h| h.to_ascii_lowercase().starts_with("content-type:"))
        {
            request.push_str("Content-Type: application/x-www-form-urlencoded\r\n");
        }
        request.push_str(&format!("Content-Length: {}\r\n", data.len()));
    }
    request.push_str("\r\n");
    request.push_str(data.as_deref().unwrap_or_default());
    let mut stream = TcpStream::connect(&addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap_or_default().to_owned();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Answer {
        status,
        headers,
        body: body.to_owned(),
    }
}

/// The text with each run of digits made `#`: what a varying value must keep.
fn digits_masked(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if !c.is_ascii_digit() {
            out.push(c);
        } else if !out.ends_with('#') {
            out.push('#');
        }
    }
    out
}

/// What a console block's serve-mode step must match, and what it found.
struct Replay<'a> {
    vary: &'a [String],
    /// Strings shown in the guide (random ids) and the real ones, for later commands.
    seen: BTreeMap<String, String>,
}

impl Replay<'_> {
    /// Compares a JSON value shown with the one received; varying fields by kind.
    fn json(
        &mut self,
        shown: &serde_json::Value,
        got: &serde_json::Value,
        at: &str,
    ) -> Vec<String> {
        use serde_json::Value;
        match (shown, got) {
            (Value::Object(a), Value::Object(b)) => {
                let mut errors = Vec::new();
                let keys_a: Vec<&String> = a.keys().collect();
                let keys_b: Vec<&String> = b.keys().collect();
                if keys_a != keys_b {
                    errors.push(format!("{at}: fields {keys_a:?} shown, {keys_b:?} sent"));
                    return errors;
                }
                for (key, value) in a {
                    let here = format!("{at}.{key}");
                    if self.vary.iter().any(|v| v == key) {
                        let kind = |v: &Value| std::mem::discriminant(v);
                        if kind(value) != kind(&b[key]) {
                            errors.push(format!("{here}: {value} shown, {} sent", b[key]));
                        } else if let (Value::String(s), Value::String(g)) = (value, &b[key]) {
                            // Text whose numbers vary (`try again in 14 seconds.`), or
                            // an id (hex digits): a shown id stands for the real one.
                            let id = |t: &str| t.chars().all(|c| c.is_ascii_hexdigit());
                            if id(s) && id(g) && s.len() == g.len() {
                                self.seen.insert(s.clone(), g.clone());
                            } else if digits_masked(s) != digits_masked(g) {
                                errors.push(format!("{here}: {s:?} shown, {g:?} sent"));
                            }
                        }
                    } else {
                        errors.extend(self.json(value, &b[key], &here));
                    }
                }
                errors
            }
            (Value::Array(a), Value::Array(b)) if a.len() == b.len() => a
                .iter()
                .zip(b)
                .enumerate()
                .flat_map(|(i, (x, y))| self.json(x, y, &format!("{at}[{i}]")))
                .collect(),
            (a, b) if a == b => Vec::new(),
            (a, b) => vec![format!("{at}: {a} shown, {b} sent")],
        }
    }

    /// Compares a `curl -i` output shown with the answer received.
    fn answer(&mut self, shown: &[String], got: &Answer) -> Vec<String> {
        let mut errors = Vec::new();
        let status = shown.first().map(String::as_str).unwrap_or_default();
        if status != got.status {
            errors.push(format!("status {status:?} shown, {:?} sent", got.status));
        }
        let blank = shown
            .iter()
            .position(|l| l.is_empty())
            .unwrap_or(shown.len());
        let shown_headers: Vec<(String, String)> = shown[1.min(shown.len())..blank]
            .iter()
            .map(|l| {
                let (n, v) = l.split_once(':').unwrap_or((l, ""));
                (n.trim().to_ascii_lowercase(), v.trim().to_owned())
            })
            .collect();
        let sent: Vec<&(String, String)> = got
            .headers
            .iter()
            .filter(|(n, _)| !matches!(n.as_str(), "content-length" | "date" | "connection"))
            .collect();
        let names = |h: &[&(String, String)]| h.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
        let shown_refs: Vec<&(String, String)> = shown_headers.iter().collect();
        if names(&shown_refs) != names(&sent) {
            errors.push(format!(
                "headers {:?} shown, {:?} sent",
                names(&shown_refs),
                names(&sent)
            ));
        } else {
            for ((name, value), (_, real)) in shown_headers.iter().zip(&sent) {
                let same = if self.vary.iter().any(|v| v == name) {
                    digits_masked(value) == digits_masked(real)
                } else {
                    value == real
                };
                if !same {
                    errors.push(format!("header {name}: {value:?} shown, {real:?} sent"));
                }
            }
        }
        let body_shown = shown[(blank + 1).min(shown.len())..].join("\n");
        match (
            serde_json::from_str::<serde_json::Value>(&body_shown),
            serde_json::from_str::<serde_json::Value>(&got.body),
        ) {
            (Ok(a), Ok(b)) => errors.extend(self.json(&a, &b, "body")),
            _ if body_shown.trim() == got.body.trim() => {}
            _ => errors.push(format!("body {body_shown:?} shown, {:?} sent", got.body)),
        }
        errors
    }

    /// The command with the shown strings replaced by the real ones.
    fn substitute(&self, command: &str) -> String {
        self.seen
            .iter()
            .fold(command.to_owned(), |c, (shown, real)| {
                c.replace(shown, real)
            })
    }
}

/// Replays one step against the servers; returns what differs.
fn replay_curl(servers: &[Server], replay: &mut Replay<'_>, step: &Step) -> Vec<String> {
    let command = replay.substitute(&step.command);
    // `for i in $(seq N); do curl ...; done; echo`: N requests, printed on one line.
    let (count, inner) = match command.strip_prefix("for i in $(seq ") {
        Some(rest) => {
            let (count, rest) = rest.split_once(')').unwrap();
            let inner = rest
                .trim_start_matches("; do ")
                .trim_end_matches("; done; echo");
            (count.parse().unwrap(), inner.to_owned())
        }
        None => (1, command.clone()),
    };
    let words = shell_words(&inner);
    assert_eq!(words.first().map(String::as_str), Some("curl"), "{command}");
    let args = &words[1..];
    let mut out = String::new();
    let mut last = None;
    for _ in 0..count {
        let answer = curl(servers, args);
        match printed(args, &answer) {
            Some(text) => out.push_str(&text),
            None => last = Some(answer),
        }
    }
    let errors = match last {
        None => {
            let shown = step.shown.join("\n");
            if shown.trim() == out.trim() {
                Vec::new()
            } else {
                vec![format!(
                    "{:?} shown, {:?} printed",
                    shown.trim(),
                    out.trim()
                )]
            }
        }
        Some(answer) if args.iter().any(|a| a == "-i" || a == "-si") => {
            replay.answer(&step.shown, &answer)
        }
        Some(answer) => {
            // The body alone: compared as the body of an answer with no head shown.
            let mut shown = vec![answer.status.clone(), String::new()];
            shown.extend(step.shown.iter().cloned());
            let mut errors = replay.answer(&shown, &answer);
            errors.retain(|e| e.starts_with("body"));
            errors
        }
    };
    errors
        .into_iter()
        .map(|e| format!("{command}: {e}"))
        .collect()
}

/// Runs a `weir ...` step in `dir`; returns what differs.
fn replay_run(dir: &Path, step: &Step) -> Vec<String> {
    let words = shell_words(&step.command);
    assert_eq!(
        words.first().map(String::as_str),
        Some("weir"),
        "{}",
        step.command
    );
    let out = weir()
        .args(&words[1..])
        .current_dir(dir)
        .env("WEIR_ADMIN_TOKEN", ADMIN_TOKEN)
        .output()
        .unwrap();
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let got: Vec<&str> = printed.trim_end().lines().map(str::trim_end).collect();
    let shown: Vec<&str> = step.shown.iter().map(|l| l.trim_end()).collect();
    let shown: Vec<&str> = {
        let mut s = shown;
        while s.last() == Some(&"") {
            s.pop();
        }
        s
    };
    if got == shown {
        Vec::new()
    } else {
        vec![format!(
            "{}:\nshown:\n{}\nprinted:\n{}",
            step.command,
            shown.join("\n"),
            got.join("\n")
        )]
    }
}

/// The `weir serve` instances a console block talks to, and what they need.
struct Running {
    /// The instances (`twice`: two on one store).
    servers: Vec<Server>,
    /// The fields and headers not compared.
    vary: Vec<String>,
    /// The configuration's copy, when it was changed.
    _dir: Option<tempfile::TempDir>,
    /// The Redis the configuration was pointed at (`redis`).
    _redis: Option<weir_testkit::RedisServer>,
}

impl Running {
    /// Starts `serve CONFIG[; upstream][; redis][; twice][; vary: NAME...]`.
    fn start(serve: &str, at: &str) -> Self {
        let mut parts = serve.split(';').map(str::trim);
        let config = parts.next().unwrap();
        let mut vary = Vec::new();
        let (mut with_upstream, mut with_redis, mut twice) = (false, false, false);
        for part in parts {
            match part {
                "upstream" => with_upstream = true,
                "redis" => with_redis = true,
                "twice" => twice = true,
                _ => match part.strip_prefix("vary:") {
                    Some(names) => vary.extend(names.split_whitespace().map(str::to_owned)),
                    None => panic!("{at}: unknown console option {part:?}"),
                },
            }
        }
        let redis = with_redis.then(weir_testkit::RedisServer::start);
        let (path, dir) = if with_upstream || with_redis {
            let dir = workdir();
            let mut text = std::fs::read_to_string(root().join(config)).unwrap();
            if with_upstream {
                text = text.replace("http://127.0.0.1:9000", &format!("http://{}", upstream()));
            }
            if let Some(redis) = &redis {
                text = text.replace("redis://127.0.0.1:6379", &redis.url());
            }
            let file = dir.path().join("guide-config.yaml");
            std::fs::write(&file, text).unwrap();
            (file, Some(dir))
        } else {
            (root().join(config), None)
        };
        let servers = (0..if twice { 2 } else { 1 })
            .map(|_| Server::start(&path))
            .collect();
        Self {
            servers,
            vary,
            _dir: dir,
            _redis: redis,
        }
    }
}

#[test]
fn every_console_block_shows_what_weir_prints() {
    let mut failures = Vec::new();
    let mut replayed = 0;
    for (path, text) in documents() {
        let all = blocks(&text);
        let run_dir = workdir();
        for block in &all {
            if let Some(name) = block
                .marker
                .as_deref()
                .and_then(|m| m.strip_prefix("file:"))
            {
                let file = run_dir.path().join(name.trim());
                // The run directory links each entry of `examples/`: writing through
                // such a link would overwrite the repository's example.
                assert!(
                    file.symlink_metadata().is_err(),
                    "{}: the file block `{}` has the name of an entry of examples/; give it another",
                    path.display(),
                    name.trim()
                );
                std::fs::write(file, &block.text).unwrap();
            }
        }
        let mut running: Option<Running> = None;
        let mut seen = BTreeMap::new();
        for block in all.iter().filter(|b| b.info == "console") {
            let at = place(&path, block.line);
            let Some(marker) = block
                .marker
                .as_deref()
                .and_then(|m| m.strip_prefix("console:"))
                .map(str::trim)
            else {
                failures.push(format!(
                    "{at}: a console block needs <!-- console: serve ... | continued | run | not tested (why) -->"
                ));
                continue;
            };
            let mut errors = Vec::new();
            if marker.starts_with("not tested (") {
                continue;
            } else if marker == "run" {
                for step in steps(&block.text) {
                    errors.extend(replay_run(run_dir.path(), &step));
                }
            } else {
                if let Some(serve) = marker.strip_prefix("serve ") {
                    drop(running.take());
                    seen.clear();
                    running = Some(Running::start(serve, &at));
                } else if marker != "continued" {
                    panic!("{at}: unknown console marker {marker:?}");
                }
                let Some(now) = &running else {
                    panic!("{at}: `continued` with no server started before it");
                };
                let mut replay = Replay {
                    vary: &now.vary,
                    seen: std::mem::take(&mut seen),
                };
                for step in steps(&block.text) {
                    errors.extend(replay_curl(&now.servers, &mut replay, &step));
                }
                seen = replay.seen;
            }
            replayed += 1;
            failures.extend(errors.into_iter().map(|e| format!("{at}: {e}")));
        }
    }
    assert!(
        failures.is_empty(),
        "console blocks that differ from what weir prints:\n{}",
        failures.join("\n\n")
    );
    assert!(replayed >= 4, "only {replayed} console blocks replayed");
}
