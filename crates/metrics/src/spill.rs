//! A list a run appends to every second and reads whole only at its end —
//! the timeline, each second's histogram, the monitor's samples. Held in
//! memory, a day's run would grow by tens of MiB; so all but the newest
//! items go, a batch at a time, to an anonymous temp file (gone when the
//! process ends, however it ends) and are read back once by
//! [`Spilled::into_vec`]. Where no temp file can be made or written (a
//! full disk), the items stay in memory: nothing is lost, memory grows.

use serde::de::DeserializeOwned;
use serde::Serialize;
use std::fs::File;
use std::io::{BufRead, BufReader, Seek, SeekFrom, Write};

/// Items kept in memory before a batch goes to the file.
const BATCH: usize = 64;

pub struct Spilled<T> {
    /// The newest items (all of them when the file failed).
    kept: Vec<T>,
    /// JSON lines, oldest first; `None` before the first batch, or once a
    /// write failed (then everything stays in `kept`).
    file: Option<File>,
    /// Items and bytes in the file.
    in_file: usize,
    file_bytes: u64,
    file_failed: bool,
}

impl<T> Default for Spilled<T> {
    fn default() -> Self {
        Spilled {
            kept: Vec::new(),
            file: None,
            in_file: 0,
            file_bytes: 0,
            file_failed: false,
        }
    }
}

impl<T: Serialize + DeserializeOwned> Spilled<T> {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn push(&mut self, item: T) {
        self.kept.push(item);
        if self.kept.len() > BATCH && !self.file_failed {
            self.spill();
        }
    }

    pub fn len(&self) -> usize {
        self.in_file + self.kept.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The newest item (always in memory).
    pub fn last(&self) -> Option<&T> {
        self.kept.last()
    }

    /// Writes all but the newest item; on any failure keeps them, cuts the
    /// file back to what was whole, and spills no more.
    fn spill(&mut self) {
        let batch = &self.kept[..self.kept.len() - 1];
        let mut bytes = Vec::with_capacity(batch.len() * 256);
        for item in batch {
            if serde_json::to_writer(&mut bytes, item).is_err() {
                self.file_failed = true;
                return;
            }
            bytes.push(b'\n');
        }
        if self.file.is_none() {
            match tempfile::tempfile() {
                Ok(f) => self.file = Some(f),
                Err(_) => {
                    self.file_failed = true;
                    return;
                }
            }
        }
        let file = self.file.as_mut().expect("made above");
        if file.write_all(&bytes).is_err() {
            let _ = file.set_len(self.file_bytes);
            let _ = file.seek(SeekFrom::Start(self.file_bytes));
            self.file_failed = true;
            return;
        }
        self.file_bytes += bytes.len() as u64;
        self.in_file += batch.len();
        let newest = self.kept.pop().expect("more than a batch");
        self.kept.clear();
        self.kept.push(newest);
    }

    /// Every item, oldest first. Items the file cannot give back (it was
    /// changed under us) are reported on stderr and left out.
    pub fn into_vec(mut self) -> Vec<T> {
        let Some(mut file) = self.file.take() else {
            return self.kept;
        };
        let mut all = Vec::with_capacity(self.len());
        let read = file.seek(SeekFrom::Start(0)).map(|_| {
            for line in BufReader::new(&mut file).lines().take(self.in_file) {
                match line.map(|l| serde_json::from_str::<T>(&l)) {
                    Ok(Ok(item)) => all.push(item),
                    _ => break,
                }
            }
        });
        if read.is_err() || all.len() != self.in_file {
            eprintln!(
                "headroom: {} of {} items written to a temp file during the run could not be read back",
                self.in_file - all.len(),
                self.in_file
            );
        }
        all.append(&mut self.kept);
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_come_back_in_order_across_batches() {
        let mut s = Spilled::new();
        for i in 0..1000u32 {
            s.push(i);
            assert_eq!(s.last(), Some(&i));
            assert_eq!(s.len(), i as usize + 1);
        }
        assert!(s.in_file > 900, "most went to the file");
        assert!(s.kept.len() <= BATCH + 1);
        assert_eq!(s.into_vec(), (0..1000).collect::<Vec<_>>());
    }

    #[test]
    fn a_short_list_stays_in_memory() {
        let mut s = Spilled::new();
        for i in 0..10u32 {
            s.push(i);
        }
        assert!(s.file.is_none());
        assert_eq!(s.into_vec(), (0..10).collect::<Vec<_>>());
    }

    #[test]
    fn a_failed_write_keeps_everything_in_memory() {
        let mut s = Spilled::new();
        for i in 0..100u32 {
            s.push(i);
        }
        let in_file = s.in_file;
        assert!(in_file > 0);
        // A file that refuses writes, as a full disk does.
        s.file = Some(File::open("/dev/null").expect("/dev/null"));
        s.file_bytes = 0;
        s.in_file = 0;
        for i in 100..300u32 {
            s.push(i);
        }
        assert!(s.file_failed);
        assert_eq!(s.len(), 300 - in_file);
        let back = s.into_vec();
        assert_eq!(back, (in_file as u32..300).collect::<Vec<_>>());
    }
}
