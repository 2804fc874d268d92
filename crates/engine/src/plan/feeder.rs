//! Feeders: rows of test data (CSV with a header row, or a JSON array of
//! objects) handed to users, one row per iteration.
//!
//! Orders: `sequential` (file order, once through — the run stops when it
//! runs dry), `circular` (file order, wrapping), `random` (uniform, with
//! repeats), `unique` (shuffled, never repeating — stops when dry).
//! Scopes: `shared` (one cursor for all users, across worker threads),
//! `per_user` (each user walks the rows on its own) or `per_user_fixed`
//! (each user draws one row, from the shared cursor, and keeps it — a
//! user logged in as one account throughout, k6's `data[__VU % n]`).

use super::shard::{Shard, Stride};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema, Default,
)]
#[serde(rename_all = "snake_case")]
pub enum FeederOrder {
    Sequential,
    #[default]
    Circular,
    Random,
    Unique,
}

#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema, Default,
)]
#[serde(rename_all = "snake_case")]
pub enum FeederScope {
    #[default]
    Shared,
    PerUser,
    PerUserFixed,
}

#[derive(Debug)]
pub struct Feeder {
    pub name: String,
    pub columns: Vec<String>,
    rows: Vec<Vec<String>>,
    pub order: FeederOrder,
    pub scope: FeederScope,
    shared_cursor: AtomicU64,
    /// For `unique`: the shuffled row order.
    permutation: Vec<u32>,
    /// Which of the whole plan's shared draws this process makes: all of
    /// them, or one shard's (see [`Feeder::for_shard`]).
    draws: Stride,
}

/// Largest feeder file read, by default (`--max-feeder-size`): its rows
/// are held in memory for the whole run.
pub const DEFAULT_MAX_FEEDER_BYTES: u64 = 1 << 30;

/// Largest `body_file`: every request carries it, and it is held in memory.
pub const MAX_BODY_FILE_BYTES: u64 = 256 << 20;

/// Reads a file the plan holds in memory (a feeder, a body): a regular
/// file — not a device (`/dev/zero`, `/dev/urandom`), a pipe or a folder,
/// which may never end — of at most `limit` bytes, checked before reading
/// and while reading (a file that grows meanwhile). The error says which
/// rule the file broke.
pub fn read_bounded(path: &Path, limit: u64) -> Result<String, String> {
    use std::io::Read;
    let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("not a regular file (a device, a pipe or a folder may never end)".into());
    }
    let too_large = |size: u64| {
        format!(
            "{} MiB is larger than the limit of {} MiB",
            // Rounded up: a file over the limit never reads as equal to it.
            size.div_ceil(1 << 20),
            limit >> 20
        )
    };
    if meta.len() > limit {
        return Err(too_large(meta.len()));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    std::fs::File::open(path)
        .and_then(|f| f.take(limit + 1).read_to_end(&mut bytes))
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > limit {
        return Err(too_large(bytes.len() as u64));
    }
    String::from_utf8(bytes).map_err(|e| format!("not UTF-8 text ({e})"))
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FeederError {
    #[error("cannot read feeder file {path}: {reason}")]
    Read { path: String, reason: String },
    #[error("feeder file {path} line {line}: {reason}")]
    Csv {
        path: String,
        line: u64,
        reason: String,
    },
    #[error("feeder file {path}: {reason}")]
    Json { path: String, reason: String },
    #[error("feeder file {path} has no rows")]
    Empty { path: String },
}

/// A feeder with no rows left (`sequential` or `unique`).
#[derive(Debug, PartialEq, Eq)]
pub struct RanDry {
    pub rows: usize,
}

impl Feeder {
    pub fn from_rows(
        name: &str,
        columns: Vec<String>,
        rows: Vec<Vec<String>>,
        order: FeederOrder,
        scope: FeederScope,
    ) -> Feeder {
        let mut permutation: Vec<u32> = (0..rows.len() as u32).collect();
        fastrand::Rng::new().shuffle(&mut permutation);
        Feeder {
            name: name.to_string(),
            columns,
            rows,
            order,
            scope,
            shared_cursor: AtomicU64::new(0),
            permutation,
            draws: Stride { first: 0, step: 1 },
        }
    }

    /// This feeder as shard `shard` of a sharded run uses it: of the whole
    /// plan's shared draws 0, 1, 2, … it makes those the shard owns, so
    /// `sequential` and `unique` rows are never used by two shards and
    /// `circular` ones are used as in one run. `unique` is shuffled with
    /// `seed`, which every shard must share (the plan's fingerprint).
    /// `random` and `per_user` feeders are unchanged (each process draws
    /// with its own random seed; users are already split between shards).
    pub fn for_shard(&self, shard: Shard, seed: u64) -> Feeder {
        let mut permutation: Vec<u32> = (0..self.rows.len() as u32).collect();
        fastrand::Rng::with_seed(seed).shuffle(&mut permutation);
        Feeder {
            name: self.name.clone(),
            columns: self.columns.clone(),
            rows: self.rows.clone(),
            order: self.order,
            scope: self.scope,
            shared_cursor: AtomicU64::new(0),
            permutation,
            draws: shard.stride(0, 1),
        }
    }

    /// Reads a `.csv` (header row = column names) or `.json` (array of
    /// objects) file of at most `limit` bytes (see [`read_bounded`]).
    pub fn load(
        name: &str,
        path: &Path,
        order: FeederOrder,
        scope: FeederScope,
        limit: u64,
    ) -> Result<Feeder, FeederError> {
        let shown = path.display().to_string();
        let text = read_bounded(path, limit).map_err(|reason| FeederError::Read {
            path: shown.clone(),
            reason,
        })?;
        let is_json = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("json"));
        let (columns, rows) = if is_json {
            parse_json(&text).map_err(|reason| FeederError::Json {
                path: shown.clone(),
                reason,
            })?
        } else {
            parse_csv(&text).map_err(|(line, reason)| FeederError::Csv {
                path: shown.clone(),
                line,
                reason,
            })?
        };
        if rows.is_empty() {
            return Err(FeederError::Empty { path: shown });
        }
        Ok(Feeder::from_rows(name, columns, rows, order, scope))
    }

    /// The columns and rows as text, for the plan's fingerprint.
    pub(crate) fn write_rows(&self, out: &mut String) {
        use std::fmt::Write;
        let _ = write!(out, "{:?}{:?}", self.columns, self.rows);
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The next row. `user_cursor` is the user's own position (used with
    /// the `per_user` scope).
    pub fn next_row(
        &self,
        user_cursor: &mut u64,
        rng: &mut fastrand::Rng,
    ) -> Result<&[String], RanDry> {
        let n = self.rows.len() as u64;
        // A fixed row is drawn once (the cursor holds it, plus one).
        if self.scope == FeederScope::PerUserFixed && *user_cursor > 0 {
            return Ok(&self.rows[(*user_cursor - 1) as usize]);
        }
        let i = match self.scope {
            FeederScope::Shared | FeederScope::PerUserFixed => self
                .draws
                .nth(self.shared_cursor.fetch_add(1, Ordering::Relaxed)),
            FeederScope::PerUser => {
                let i = *user_cursor;
                *user_cursor += 1;
                i
            }
        };
        let row = match self.order {
            FeederOrder::Random => rng.usize(..self.rows.len()),
            FeederOrder::Circular => (i % n) as usize,
            FeederOrder::Sequential if i < n => i as usize,
            FeederOrder::Unique if i < n => self.permutation[i as usize] as usize,
            FeederOrder::Sequential | FeederOrder::Unique => {
                return Err(RanDry {
                    rows: self.rows.len(),
                })
            }
        };
        if self.scope == FeederScope::PerUserFixed {
            *user_cursor = row as u64 + 1;
        }
        Ok(&self.rows[row])
    }
}

/// Column names and rows.
type Table = (Vec<String>, Vec<Vec<String>>);

fn parse_csv(text: &str) -> Result<Table, (u64, String)> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(true)
        .trim(csv::Trim::All)
        .from_reader(text.as_bytes());
    let columns: Vec<String> = reader
        .headers()
        .map_err(|e| (1, e.to_string()))?
        .iter()
        .map(str::to_string)
        .collect();
    if columns.iter().any(String::is_empty) {
        return Err((
            1,
            "the header row names every column (an empty name was found)".into(),
        ));
    }
    let mut rows = Vec::new();
    for record in reader.records() {
        let record = record.map_err(|e| {
            let line = e.position().map_or(0, |p| p.line());
            (line, e.to_string())
        })?;
        rows.push(record.iter().map(str::to_string).collect());
    }
    Ok((columns, rows))
}

fn parse_json(text: &str) -> Result<Table, String> {
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let items = value.as_array().ok_or("expected a JSON array of objects")?;
    let mut columns: Vec<String> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let obj = item
            .as_object()
            .ok_or_else(|| format!("item {} is not an object", i + 1))?;
        for k in obj.keys() {
            if !columns.contains(k) {
                columns.push(k.clone());
            }
        }
    }
    let rows = items
        .iter()
        .map(|item| {
            columns
                .iter()
                .map(|c| match item.get(c) {
                    None | Some(serde_json::Value::Null) => String::new(),
                    Some(serde_json::Value::String(s)) => s.clone(),
                    Some(v) => v.to_string(),
                })
                .collect()
        })
        .collect();
    Ok((columns, rows))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feeder(order: FeederOrder, scope: FeederScope) -> Feeder {
        let rows = (0..5).map(|i| vec![i.to_string()]).collect();
        Feeder::from_rows("f", vec!["id".into()], rows, order, scope)
    }

    fn draw(f: &Feeder, cursor: &mut u64, rng: &mut fastrand::Rng) -> Result<String, RanDry> {
        f.next_row(cursor, rng).map(|r| r[0].clone())
    }

    #[test]
    fn orders() {
        let mut rng = fastrand::Rng::with_seed(1);
        let mut c = 0;
        let f = feeder(FeederOrder::Circular, FeederScope::Shared);
        let got: Vec<_> = (0..7)
            .map(|_| draw(&f, &mut c, &mut rng).unwrap())
            .collect();
        assert_eq!(got, ["0", "1", "2", "3", "4", "0", "1"]);

        let f = feeder(FeederOrder::Sequential, FeederScope::Shared);
        let got: Vec<_> = (0..5)
            .map(|_| draw(&f, &mut c, &mut rng).unwrap())
            .collect();
        assert_eq!(got, ["0", "1", "2", "3", "4"]);
        assert_eq!(draw(&f, &mut c, &mut rng), Err(RanDry { rows: 5 }));

        let f = feeder(FeederOrder::Unique, FeederScope::Shared);
        let mut got: Vec<_> = (0..5)
            .map(|_| draw(&f, &mut c, &mut rng).unwrap())
            .collect();
        assert!(draw(&f, &mut c, &mut rng).is_err());
        got.sort();
        assert_eq!(got, ["0", "1", "2", "3", "4"], "unique never repeats");

        let f = feeder(FeederOrder::Random, FeederScope::Shared);
        let seen: std::collections::BTreeSet<_> = (0..200)
            .map(|_| draw(&f, &mut c, &mut rng).unwrap())
            .collect();
        assert_eq!(seen.len(), 5, "random covers the rows");
    }

    #[test]
    fn shards_split_rows_without_overlap() {
        let mut rng = fastrand::Rng::with_seed(1);
        for order in [FeederOrder::Sequential, FeederOrder::Unique] {
            let whole = feeder(order, FeederScope::Shared);
            let mut used = Vec::new();
            for index in 0..3 {
                let shard = whole.for_shard(Shard { index, count: 3 }, 42);
                let mut c = 0;
                while let Ok(row) = draw(&shard, &mut c, &mut rng) {
                    used.push(row);
                }
            }
            used.sort();
            assert_eq!(used, ["0", "1", "2", "3", "4"], "{order:?}: each row once");
        }
        // Circular: shard 2 of 2 takes the whole plan's draws 1, 3, 5, …
        let whole = feeder(FeederOrder::Circular, FeederScope::Shared);
        let second = whole.for_shard(Shard { index: 1, count: 2 }, 0);
        let mut c = 0;
        let got: Vec<_> = (0..4)
            .map(|_| draw(&second, &mut c, &mut rng).unwrap())
            .collect();
        assert_eq!(got, ["1", "3", "0", "2"]);
    }

    #[test]
    fn a_fixed_row_per_user_is_drawn_once_from_the_shared_cursor() {
        let mut rng = fastrand::Rng::with_seed(1);
        let f = feeder(FeederOrder::Circular, FeederScope::PerUserFixed);
        let (mut a, mut b) = (0, 0);
        assert_eq!(draw(&f, &mut a, &mut rng).unwrap(), "0");
        assert_eq!(draw(&f, &mut b, &mut rng).unwrap(), "1");
        // Every later iteration: the same row for each user.
        for _ in 0..3 {
            assert_eq!(draw(&f, &mut a, &mut rng).unwrap(), "0");
            assert_eq!(draw(&f, &mut b, &mut rng).unwrap(), "1");
        }
        // A new user (an arrival, its cursor reset) draws the next.
        let mut c = 0;
        assert_eq!(draw(&f, &mut c, &mut rng).unwrap(), "2");
    }

    #[test]
    fn per_user_cursors_are_independent() {
        let mut rng = fastrand::Rng::with_seed(1);
        let f = feeder(FeederOrder::Sequential, FeederScope::PerUser);
        let (mut a, mut b) = (0, 0);
        assert_eq!(draw(&f, &mut a, &mut rng).unwrap(), "0");
        assert_eq!(draw(&f, &mut a, &mut rng).unwrap(), "1");
        assert_eq!(draw(&f, &mut b, &mut rng).unwrap(), "0");
    }

    #[test]
    fn csv_and_json_files() {
        let (cols, rows) = parse_csv("id,name\n1, a\n2,b\n").unwrap();
        assert_eq!(cols, ["id", "name"]);
        assert_eq!(rows, vec![vec!["1", "a"], vec!["2", "b"]]);
        assert!(parse_csv("id\n1\n2,3\n").is_err());
        let (cols, rows) = parse_json(r#"[{"id": 1, "n": "x"}, {"id": 2}]"#).unwrap();
        assert_eq!(cols, ["id", "n"]);
        assert_eq!(rows, vec![vec!["1", "x"], vec!["2", ""]]);
        assert!(parse_json("{}").is_err());
        assert!(parse_json("[1]").is_err());
    }
}
