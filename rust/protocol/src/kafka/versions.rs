//! Version ranges, as the schemas write them.

use std::fmt;

/// A range of versions, `lowest..=highest`; empty when `lowest > highest`. Written in the
/// schemas as `"3+"` (open), `"0-4"`, `"5"` or `"none"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Versions {
    lowest: i16,
    highest: i16,
}

impl Versions {
    pub const NONE: Versions = Versions {
        lowest: 0,
        highest: -1,
    };

    pub const fn new(lowest: i16, highest: i16) -> Versions {
        Versions { lowest, highest }
    }

    /// Parses `"N+"`, `"A-B"`, `"N"` or `"none"`.
    pub fn parse(text: &str) -> Result<Versions, String> {
        let text = text.trim();
        let number = |s: &str| {
            s.trim()
                .parse::<i16>()
                .ok()
                .filter(|v| *v >= 0)
                .ok_or_else(|| format!("invalid version range {text:?}"))
        };
        if text == "none" {
            Ok(Versions::NONE)
        } else if let Some(lowest) = text.strip_suffix('+') {
            Ok(Versions::new(number(lowest)?, i16::MAX))
        } else if let Some((lowest, highest)) = text.split_once('-') {
            let versions = Versions::new(number(lowest)?, number(highest)?);
            if versions.is_empty() {
                return Err(format!("invalid version range {text:?}"));
            }
            Ok(versions)
        } else {
            let version = number(text)?;
            Ok(Versions::new(version, version))
        }
    }

    pub fn contains(self, version: i16) -> bool {
        self.lowest <= version && version <= self.highest
    }

    pub fn is_empty(self) -> bool {
        self.lowest > self.highest
    }

    pub fn lowest(self) -> i16 {
        self.lowest
    }

    /// `i16::MAX` for an open range (`"3+"`).
    pub fn highest(self) -> i16 {
        self.highest
    }

    /// Whether every version of `other` is one of these.
    pub fn includes(self, other: Versions) -> bool {
        other.is_empty() || (self.lowest <= other.lowest && other.highest <= self.highest)
    }

    /// The versions in both.
    pub fn intersect(self, other: Versions) -> Versions {
        let versions = Versions::new(
            self.lowest.max(other.lowest),
            self.highest.min(other.highest),
        );
        if versions.is_empty() {
            Versions::NONE
        } else {
            versions
        }
    }
}

impl fmt::Display for Versions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            write!(f, "none")
        } else if self.highest == i16::MAX {
            write!(f, "{}+", self.lowest)
        } else if self.lowest == self.highest {
            write!(f, "{}", self.lowest)
        } else {
            write!(f, "{}-{}", self.lowest, self.highest)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Versions;

    #[test]
    fn version_ranges() {
        assert_eq!(Versions::parse("3+"), Ok(Versions::new(3, i16::MAX)));
        assert_eq!(Versions::parse("0-4"), Ok(Versions::new(0, 4)));
        assert_eq!(Versions::parse("5"), Ok(Versions::new(5, 5)));
        assert_eq!(Versions::parse("none"), Ok(Versions::NONE));
        assert!(Versions::parse("none").unwrap().is_empty());
        for bad in ["", "x", "4-2", "-1", "1-", "+", "3++"] {
            assert!(Versions::parse(bad).is_err(), "{bad:?} parsed");
        }
        for text in ["3+", "0-4", "5", "none"] {
            assert_eq!(Versions::parse(text).unwrap().to_string(), text);
        }
        assert!(Versions::parse("3+").unwrap().contains(i16::MAX));
        assert!(!Versions::parse("3+").unwrap().contains(2));
        assert!(Versions::parse("0+")
            .unwrap()
            .includes(Versions::parse("3-5").unwrap()));
        assert!(!Versions::parse("4+")
            .unwrap()
            .includes(Versions::parse("3-5").unwrap()));
        assert_eq!(
            Versions::new(0, 4).intersect(Versions::new(3, 9)),
            Versions::new(3, 4)
        );
        assert!(Versions::new(0, 2)
            .intersect(Versions::new(3, 9))
            .is_empty());
    }
}
