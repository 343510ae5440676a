//! Reading a fuzz input as a script: each call takes the next bytes, and an exhausted input
//! reads as zeros so every script is finite and every prefix of an input is a valid script.

#[derive(Debug)]
pub(crate) struct Script<'a> {
    data: &'a [u8],
}

impl<'a> Script<'a> {
    pub(crate) fn new(data: &'a [u8]) -> Self {
        Script { data }
    }
    pub(crate) fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
    pub(crate) fn u8(&mut self) -> u8 {
        match self.data.split_first() {
            Some((&b, rest)) => {
                self.data = rest;
                b
            }
            None => 0,
        }
    }
    pub(crate) fn u16(&mut self) -> u16 {
        u16::from_be_bytes([self.u8(), self.u8()])
    }
    pub(crate) fn u32(&mut self) -> u32 {
        u32::from_be_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    /// Up to `n` bytes (fewer at the end of the input).
    pub(crate) fn bytes(&mut self, n: usize) -> &'a [u8] {
        let (head, tail) = self.data.split_at(n.min(self.data.len()));
        self.data = tail;
        head
    }
}
