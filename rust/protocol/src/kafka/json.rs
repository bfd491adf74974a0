//! Kafka's schema files are JSON with `//` line comments (the license header and notes
//! between fields). `serde_json` reads strict JSON, so the comments are cut out first.

/// `text` without its `//` comments. A `//` inside a string literal (a URL in an "about"
/// text) is kept, escapes (`\"`, `\\`) included; line breaks are kept, so a parse error
/// still names the line of the original file.
pub(crate) fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    let mut in_string = false;
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            match c {
                '\\' => {
                    // The escaped character cannot end the string.
                    if let Some(escaped) = chars.next() {
                        out.push(escaped);
                    }
                }
                '"' => in_string = false,
                _ => {}
            }
        } else if c == '/' && chars.peek() == Some(&'/') {
            for skipped in chars.by_ref() {
                if skipped == '\n' {
                    out.push('\n');
                    break;
                }
            }
        } else {
            in_string = c == '"';
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::strip_comments;

    #[test]
    fn drops_line_comments_and_keeps_line_breaks() {
        let text = "// license\n{ \"a\": 1, // note\n  \"b\": 2 }\n";
        assert_eq!(strip_comments(text), "\n{ \"a\": 1, \n  \"b\": 2 }\n");
    }

    #[test]
    fn keeps_slashes_inside_strings() {
        let text = r#"{ "about": "see https://kafka.apache.org // not a comment" } // one"#;
        assert_eq!(
            strip_comments(text),
            r#"{ "about": "see https://kafka.apache.org // not a comment" } "#
        );
    }

    #[test]
    fn escaped_quotes_do_not_end_a_string() {
        let text = r#"{ "about": "a \"quoted // part\" and a \\" } // gone"#;
        assert_eq!(
            strip_comments(text),
            r#"{ "about": "a \"quoted // part\" and a \\" } "#
        );
    }

    #[test]
    fn a_single_slash_is_not_a_comment() {
        assert_eq!(strip_comments("[1 /2]"), "[1 /2]");
    }
}
