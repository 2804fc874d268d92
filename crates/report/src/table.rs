//! A plain table — headers, rows, which columns are text — written as
//! aligned terminal text, Markdown or CSV. Every table headroom prints
//! goes through here, so `--markdown` and the CSV files match the terminal.

use std::io::{self, Write};

#[derive(Clone, Debug, Default)]
pub struct Table {
    pub headers: Vec<String>,
    pub rows: Vec<Vec<String>>,
    /// Columns aligned left (text); the rest are numbers, aligned right.
    pub left: Vec<usize>,
}

impl Table {
    /// Puts `headers` before column `at`, keeping the left-aligned
    /// columns after it left-aligned (the rows' cells are the caller's).
    pub fn insert_headers(&mut self, at: usize, headers: [String; 2]) {
        for (i, h) in headers.into_iter().enumerate() {
            self.headers.insert(at + i, h);
        }
        self.left = self
            .left
            .iter()
            .map(|&c| if c >= at { c + 2 } else { c })
            .collect();
    }

    pub fn new(headers: &[&str], left: &[usize]) -> Table {
        Table {
            headers: headers.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
            left: left.to_vec(),
        }
    }

    pub fn push(&mut self, row: Vec<String>) {
        debug_assert_eq!(row.len(), self.headers.len());
        self.rows.push(row);
    }

    /// The header row followed by the rows.
    pub fn with_headers(&self) -> Vec<Vec<String>> {
        std::iter::once(self.headers.clone())
            .chain(self.rows.iter().cloned())
            .collect()
    }

    fn widths(&self) -> Vec<usize> {
        (0..self.headers.len())
            .map(|c| {
                std::iter::once(&self.headers)
                    .chain(&self.rows)
                    .map(|r| r[c].chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect()
    }

    /// Aligned columns, two spaces of indent.
    pub fn write_text(&self, out: &mut dyn Write) -> io::Result<()> {
        let widths = self.widths();
        for row in std::iter::once(&self.headers).chain(&self.rows) {
            let mut line = String::from(" ");
            for (c, cell) in row.iter().enumerate() {
                let pad = " ".repeat(widths[c] - cell.chars().count());
                if self.left.contains(&c) {
                    line.push_str(&format!(" {cell}{pad}"));
                } else {
                    line.push_str(&format!(" {pad}{cell}"));
                }
            }
            writeln!(out, "{}", line.trim_end())?;
        }
        Ok(())
    }

    /// A GitHub-flavoured Markdown table, numbers right-aligned.
    pub fn markdown(&self) -> String {
        let cell = |s: &str| s.replace('|', "\\|");
        let mut out = String::new();
        let head: Vec<String> = self.headers.iter().map(|h| cell(h)).collect();
        out.push_str(&format!("| {} |\n", head.join(" | ")));
        let rule: Vec<&str> = (0..self.headers.len())
            .map(|c| {
                if self.left.contains(&c) {
                    ":---"
                } else {
                    "---:"
                }
            })
            .collect();
        out.push_str(&format!("|{}|\n", rule.join("|")));
        for row in &self.rows {
            let cells: Vec<String> = row.iter().map(|c| cell(c)).collect();
            out.push_str(&format!("| {} |\n", cells.join(" | ")));
        }
        out
    }
}

/// One CSV field, quoted when it must be.
pub fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_markdown_align() {
        let mut t = Table::new(&["Name", "req/s"], &[0]);
        t.push(vec!["a|b".into(), "1.5".into()]);
        t.push(vec!["long name".into(), "100.0".into()]);
        let mut text = Vec::new();
        t.write_text(&mut text).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert_eq!(
            text,
            "  Name      req/s\n  a|b         1.5\n  long name 100.0\n"
        );
        assert_eq!(
            t.markdown(),
            "| Name | req/s |\n|:---|---:|\n| a\\|b | 1.5 |\n| long name | 100.0 |\n"
        );
    }
}
