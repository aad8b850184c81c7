//! The command line a program was started with: `NAME [ARGUMENTS…]`, words separated by
//! spaces.

/// A program's command line, split into its name and arguments.
#[derive(Clone, Copy, Debug)]
pub struct Arguments<'line> {
    line: &'line str,
}

impl<'line> Arguments<'line> {
    /// Wraps a command line.
    pub fn new(line: &'line str) -> Arguments<'line> {
        Arguments { line }
    }

    /// The whole command line.
    pub fn line(&self) -> &'line str {
        self.line
    }

    /// The program's name (the first word), or `""`.
    pub fn program(&self) -> &'line str {
        self.line.split_ascii_whitespace().next().unwrap_or("")
    }

    /// The arguments after the name.
    pub fn iter(&self) -> impl Iterator<Item = &'line str> + use<'line> {
        self.line.split_ascii_whitespace().skip(1)
    }

    /// Argument `index` (0 is the first after the name).
    pub fn get(&self, index: usize) -> Option<&'line str> {
        self.iter().nth(index)
    }

    /// Argument `index` parsed as a number, or `default` when absent or not a number.
    pub fn number_or(&self, index: usize, default: u64) -> u64 {
        self.get(index).and_then(|word| word.parse().ok()).unwrap_or(default)
    }
}

#[cfg(test)]
mod tests {
    use super::Arguments;

    #[test]
    fn splits_name_and_arguments() {
        let arguments = Arguments::new("spin  3 4000 ");
        assert_eq!(arguments.program(), "spin");
        assert_eq!(arguments.iter().collect::<Vec<_>>(), ["3", "4000"]);
        assert_eq!(arguments.number_or(0, 9), 3);
        assert_eq!(arguments.number_or(1, 9), 4000);
        assert_eq!(arguments.number_or(2, 9), 9);
        assert_eq!(Arguments::new("hello x").number_or(0, 7), 7);
        assert_eq!(Arguments::new("").program(), "");
        assert_eq!(Arguments::new("").get(0), None);
    }
}
