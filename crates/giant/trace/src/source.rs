//! Row sources: the pull interface the simulator reads from.
//!
//! A plain `Iterator<Item = Result<T, E>>` would do, but the `Option<Result<..>>` /
//! `Result<Option<..>>` conversions and `flat_map` over files cost a measurable share of
//! the end-to-end time (see docs/benchmarks-giant.md), so readers expose `next_row`
//! directly and [`Chain`] strings the parts of a table together.

use std::io::Read;

use crate::{Record, TraceReader};

/// Yields rows in time order until `Ok(None)`.
pub trait RowSource {
    /// The row type.
    type Row;
    /// What reading can fail with.
    type Error;
    /// Next row, `Ok(None)` at the end.
    fn next_row(&mut self) -> Result<Option<Self::Row>, Self::Error>;
    /// The same, written into `slot` (`None` at the end; unspecified after an error).
    /// A consumer that keeps the current row in place (the simulator's merge) saves the
    /// moves of the row through each layer's return value.
    #[inline]
    fn next_into(&mut self, slot: &mut Option<Self::Row>) -> Result<(), Self::Error> {
        *slot = self.next_row()?;
        Ok(())
    }
}

impl<R: Read, T: Record> RowSource for TraceReader<R, T> {
    type Row = T;
    type Error = crate::TraceError;
    #[inline]
    fn next_row(&mut self) -> Result<Option<T>, crate::TraceError> {
        TraceReader::next_row(self)
    }
    #[inline]
    fn next_into(&mut self, slot: &mut Option<T>) -> Result<(), crate::TraceError> {
        TraceReader::next_into(self, slot)
    }
}

/// Any iterator of results as a source (in-memory rows, tests).
pub struct IterSource<I>(pub I);

impl<I, T, E> RowSource for IterSource<I>
where
    I: Iterator<Item = Result<T, E>>,
{
    type Row = T;
    type Error = E;
    #[inline]
    fn next_row(&mut self) -> Result<Option<T>, E> {
        self.0.next().transpose()
    }
}

/// Sources opened one after the other (the parts of a table), each only when the previous
/// one is exhausted, so 500 parts never hold 500 decoders at once.
pub struct Chain<S, F> {
    open: F,
    parts: usize,
    next: usize,
    cur: Option<S>,
}

impl<S, F> Chain<S, F>
where
    S: RowSource,
    F: FnMut(usize) -> Result<S, S::Error>,
{
    /// `open(i)` opens part `i` of `parts`.
    pub fn new(parts: usize, open: F) -> Self {
        Self {
            open,
            parts,
            next: 0,
            cur: None,
        }
    }
}

impl<S, F> RowSource for Chain<S, F>
where
    S: RowSource,
    F: FnMut(usize) -> Result<S, S::Error>,
{
    type Row = S::Row;
    type Error = S::Error;
    #[inline]
    fn next_row(&mut self) -> Result<Option<S::Row>, S::Error> {
        loop {
            if let Some(cur) = &mut self.cur {
                if let Some(r) = cur.next_row()? {
                    return Ok(Some(r));
                }
                self.cur = None;
            }
            if self.next >= self.parts {
                return Ok(None);
            }
            self.cur = Some((self.open)(self.next)?);
            self.next += 1;
        }
    }
    #[inline]
    fn next_into(&mut self, slot: &mut Option<S::Row>) -> Result<(), S::Error> {
        loop {
            if let Some(cur) = &mut self.cur {
                cur.next_into(slot)?;
                if slot.is_some() {
                    return Ok(());
                }
                self.cur = None;
            }
            if self.next >= self.parts {
                *slot = None;
                return Ok(());
            }
            self.cur = Some((self.open)(self.next)?);
            self.next += 1;
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::{OnError, TaskEvent};

    #[test]
    fn chain_reads_parts_in_order_and_stops_at_errors() {
        let parts = [
            "1,,5,0,,0,u,0,0,,,,\n2,,5,1,,0,u,0,0,,,,\n",
            "",
            "3,,5,2,,0,u,0,0,,,,\n",
            "x\n",
        ];
        let mut c = Chain::new(parts.len(), |i| {
            Ok(TraceReader::<_, TaskEvent>::new(
                parts[i].as_bytes(),
                format!("part{i}"),
                OnError::Fail,
            ))
        });
        let times: Vec<u64> = (0..3)
            .map(|_| c.next_row().unwrap().unwrap().time)
            .collect();
        assert_eq!(times, [1, 2, 3]);
        let mut c2 = Chain::new(parts.len(), |i| {
            Ok(TraceReader::<_, TaskEvent>::new(
                parts[i].as_bytes(),
                format!("part{i}"),
                OnError::Fail,
            ))
        });
        let mut slot = None;
        for t in [1, 2, 3] {
            c2.next_into(&mut slot).unwrap();
            assert_eq!(slot.map(|r| r.time), Some(t));
        }
        assert!(c2.next_into(&mut slot).is_err());
        assert!(c
            .next_row()
            .unwrap_err()
            .to_string()
            .starts_with("part3:1:"));
        let mut it = IterSource(vec![Ok::<u32, ()>(1), Err(())].into_iter());
        assert_eq!(it.next_row(), Ok(Some(1)));
        assert_eq!(it.next_row(), Err(()));
        assert_eq!(it.next_row(), Ok(None));
    }
}
