//! Notes kept in a directory, written durably on every change.
//!
//! Sandboxed, the Tick sees only the directory it is granted:
//! `tickbox call notes.wasm write '{"name":"todo","text":"milk"}' --yes --dir ./my-notes::/notes`.
//! Natively it uses `$NOTES_DIR`, or `./notes`.
//!
//! **Durability:** every change is on disk before the call's response is
//! sent: the text goes to a temporary file, which is flushed and then
//! renamed over the note. A rename replaces a file atomically, so a kill at
//! any moment leaves either the old note or the new one, never half of one.
//! Nothing is saved at shutdown, because a host may SIGKILL without warning
//! (§4.5).

use std::io::Write;
use std::path::{Path, PathBuf};
use tickbox_guest::prelude::*;

/// Where a sandboxed Tick expects its grant (`--dir HOST::/notes`).
const GRANTED: &str = "/notes";
/// Notes larger than this are refused: state and results stay small.
const MAX_NOTE: usize = 64 * 1024;

struct Notes {
    dir: PathBuf,
    /// Why the directory is unusable, shown in state and the view.
    problem: Option<String>,
    /// Names and sizes, sorted; the texts stay on disk.
    index: Vec<(String, usize)>,
    selected: usize,
}

#[derive(Deserialize, JsonSchema)]
struct Name {
    /// Letters, digits, `-` and `_`; at most 64.
    name: String,
}

#[derive(Deserialize, JsonSchema)]
struct NewText {
    /// Letters, digits, `-` and `_`; at most 64.
    name: String,
    /// The note's full new text (at most 64 KiB).
    text: String,
}

fn valid(name: &str) -> Result<(), ToolError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if ok {
        Ok(())
    } else {
        Err(ToolError::rejected(format!(
            "invalid note name {name:?}: use letters, digits, - and _ (at most 64)"
        )))
    }
}

impl Notes {
    fn open() -> Notes {
        let dir = match std::env::var_os("NOTES_DIR") {
            Some(d) => PathBuf::from(d),
            None if Path::new(GRANTED).is_dir() => PathBuf::from(GRANTED),
            None => PathBuf::from("notes"),
        };
        let mut notes = Notes {
            dir,
            problem: None,
            index: Vec::new(),
            selected: 0,
        };
        if let Err(e) = std::fs::create_dir_all(&notes.dir) {
            notes.problem = Some(format!(
                "cannot use {}: {e}; a sandboxed Tick needs `--dir HOST_DIR::{GRANTED}`",
                notes.dir.display()
            ));
        }
        notes.reload();
        notes
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.txt"))
    }

    /// Rebuilds the index from disk. Leftover temporary files of a write
    /// that was killed midway are ignored: the rename never happened.
    fn reload(&mut self) {
        if self.problem.is_some() {
            return;
        }
        let mut index = Vec::new();
        if let Ok(entries) = std::fs::read_dir(&self.dir) {
            for e in entries.flatten() {
                let file = e.file_name().to_string_lossy().into_owned();
                if let Some(name) = file.strip_suffix(".txt") {
                    if valid(name).is_ok() {
                        let len = e.metadata().map(|m| m.len() as usize).unwrap_or(0);
                        index.push((name.to_string(), len));
                    }
                }
            }
        }
        index.sort();
        self.index = index;
    }

    fn usable(&self) -> Result<(), ToolError> {
        match &self.problem {
            Some(p) => Err(ToolError::rejected(p.clone())),
            None => Ok(()),
        }
    }

    fn read(&mut self, a: Name, _: &mut Ctx) -> Result<Value, ToolError> {
        self.usable()?;
        valid(&a.name)?;
        match std::fs::read_to_string(self.path(&a.name)) {
            Ok(text) => Ok(json!({ "name": a.name, "text": text })),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Err(ToolError::rejected(format!("no note named {:?}", a.name)))
            }
            Err(e) => Err(e.into()),
        }
    }

    fn write(&mut self, a: NewText, _: &mut Ctx) -> Result<Value, ToolError> {
        self.usable()?;
        valid(&a.name)?;
        if a.text.len() > MAX_NOTE {
            return Err(ToolError::rejected("a note holds at most 64 KiB"));
        }
        let tmp = self.dir.join(format!(".{}.tmp", a.name));
        // From here on the call may have had effects: errors are "executed".
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(a.text.as_bytes())?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, self.path(&a.name))?;
        // Make the rename itself durable where the platform allows it.
        if let Ok(d) = std::fs::File::open(&self.dir) {
            let _ = d.sync_all();
        }
        self.reload();
        Ok(json!({ "name": a.name, "bytes": a.text.len() }))
    }

    fn delete(&mut self, a: Name, _: &mut Ctx) -> Result<Value, ToolError> {
        self.usable()?;
        valid(&a.name)?;
        match std::fs::remove_file(self.path(&a.name)) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(ToolError::rejected(format!("no note named {:?}", a.name)))
            }
            Err(e) => return Err(e.into()),
        }
        self.reload();
        Ok(json!({ "deleted": a.name }))
    }
}

impl Tick for Notes {
    const KIND: &'static str = "example.notes";
    const TITLE: &'static str = "Notes";
    const DESCRIPTION: &'static str =
        "Named text notes kept in a directory; every change is saved at once.";

    fn state(&self) -> impl Serialize {
        let notes: Vec<Value> = self
            .index
            .iter()
            .map(|(name, bytes)| json!({ "name": name, "bytes": bytes }))
            .collect();
        json!({ "notes": notes, "problem": self.problem })
    }

    fn tools(&self, tools: &mut Tools<Self>) {
        tools
            .add(
                "read",
                "Read one note's text.",
                Effect::ReadOnly,
                Self::read,
            )
            .add(
                "write",
                "Create a note or replace its text.",
                Effect::Mutates,
                Self::write,
            )
            .add("delete", "Delete a note.", Effect::Mutates, Self::delete);
    }

    fn on_key(&mut self, key: Key, _: &mut Ctx) {
        // Selection is presentation, not state: no update.
        match key {
            Key::Up => self.selected = self.selected.saturating_sub(1),
            Key::Down => {
                self.selected = (self.selected + 1).min(self.index.len().saturating_sub(1))
            }
            _ => {}
        }
    }

    fn view(&self, frame: &mut Frame) {
        let [list_area, text_area] =
            Layout::horizontal([Constraint::Length(28), Constraint::Min(10)]).areas(frame.area());
        if let Some(p) = &self.problem {
            frame.render_widget(
                Paragraph::new(p.as_str())
                    .wrap(Wrap { trim: true })
                    .block(Block::default().borders(Borders::ALL).title(" Notes ")),
                frame.area(),
            );
            return;
        }
        let items: Vec<ListItem> = self
            .index
            .iter()
            .enumerate()
            .map(|(i, (name, _))| {
                let style = if i == self.selected {
                    Style::default().reversed()
                } else {
                    Style::default()
                };
                ListItem::new(name.as_str()).style(style)
            })
            .collect();
        frame.render_widget(
            List::new(items).block(
                Block::default()
                    .borders(Borders::ALL)
                    .title(" Notes (↑/↓) "),
            ),
            list_area,
        );
        let text = self
            .index
            .get(self.selected)
            .and_then(|(name, _)| std::fs::read_to_string(self.path(name)).ok())
            .unwrap_or_default();
        frame.render_widget(
            Paragraph::new(text)
                .wrap(Wrap { trim: false })
                .block(Block::default().borders(Borders::ALL)),
            text_area,
        );
    }
}

tickbox_guest::main!(Notes, Notes::open());
