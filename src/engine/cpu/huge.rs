//! Arrays in anonymous memory advised to 2 MB pages, for the weights repacked at load: a decode
//! step streams every one of them once, and through 4 KB pages that is a page-table walk every
//! 4 KB and a hardware prefetcher stopped at every page's end (the file's own bytes are held
//! the same way, `GgufFile::prefault`). Written here because `Vec` cannot take memory from a
//! map, and the repacked blocks are plain integers, so a mapping's bytes are theirs.

use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};

/// A 2 MB page.
const HUGE_PAGE: usize = 2 << 20;

/// `len` values of `T`, each `T::default()` when made, in memory advised to huge pages where
/// the kernel takes the advice (else in ordinary pages, the same values).
pub struct HugeSlice<T> {
    map: memmap2::MmapMut,
    /// Bytes from the map's start to the first value: the map starts on a 4 KB page, the
    /// values on a 2 MB one.
    skew: usize,
    len: usize,
    _values: PhantomData<T>,
}

impl<T: Copy + Default + Send> HugeSlice<T> {
    /// `len` defaults, written on the pool a 2 MB page a task (so the pages fault in on every
    /// thread), or the map's error (the system is out of address space or memory).
    pub fn new(len: usize) -> std::io::Result<HugeSlice<T>> {
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .ok_or_else(|| std::io::Error::other("a repacked matrix's size overflows"))?;
        let mut map = memmap2::MmapMut::map_anon(bytes + HUGE_PAGE)?;
        let skew = map
            .as_ptr()
            .align_offset(HUGE_PAGE.max(std::mem::align_of::<T>()));
        // Only advice: ordinary pages hold the same values.
        #[cfg(target_os = "linux")]
        let _ = map.advise_range(memmap2::Advice::HugePage, skew, bytes);
        // SAFETY: the map holds `skew + bytes` bytes, `skew` aligns them for T, and any bytes
        // are a `MaybeUninit<T>`; the slice is the only borrow of the map until it returns.
        let values = unsafe {
            std::slice::from_raw_parts_mut(
                map.as_mut_ptr()
                    .add(skew)
                    .cast::<std::mem::MaybeUninit<T>>(),
                len,
            )
        };
        let per = (HUGE_PAGE / std::mem::size_of::<T>().max(1)).max(1);
        super::pool::par_chunks_mut(values, per, |_, chunk| {
            for v in chunk {
                v.write(T::default());
            }
        });
        Ok(HugeSlice {
            map,
            skew,
            len,
            _values: PhantomData,
        })
    }
}

impl<T> Deref for HugeSlice<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: the map holds `skew + len * size_of::<T>()` bytes (`new`), `skew` aligns
        // them for T, and every value was written as a T by `new` and only through `&mut [T]`
        // since; the map lives as long as `self`.
        unsafe { std::slice::from_raw_parts(self.map.as_ptr().add(self.skew).cast(), self.len) }
    }
}

impl<T> DerefMut for HugeSlice<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as `deref`, and `&mut self` makes this the only borrow.
        unsafe {
            std::slice::from_raw_parts_mut(self.map.as_mut_ptr().add(self.skew).cast(), self.len)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_huge_slice_holds_its_defaults_and_what_is_written() {
        let mut s = HugeSlice::<[u32; 3]>::new(1000).expect("anonymous memory");
        assert_eq!(s.len(), 1000);
        assert!(s.iter().all(|v| *v == [0; 3]));
        assert_eq!(s.as_ptr() as usize % HUGE_PAGE, 0, "starts on a 2 MB page");
        for (i, v) in s.iter_mut().enumerate() {
            *v = [i as u32; 3];
        }
        assert!(s.iter().enumerate().all(|(i, v)| *v == [i as u32; 3]));
        let empty = HugeSlice::<u8>::new(0).expect("anonymous memory");
        assert!(empty.is_empty());
    }
}
