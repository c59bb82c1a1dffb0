//! Media the provider accepts (PROVIDER.md §3 "Supported types and max sizes").

use crate::ValidationError;

/// The MIME type of an image the provider takes (JPEG or PNG, §3), by its magic bytes; `None`
/// for anything else, whatever its name or declared type says.
pub fn image_mime(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("image/jpeg")
    } else if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else {
        None
    }
}

/// The media kinds disparo sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MediaKind {
    /// `image/jpeg`, `image/png`, up to 5 MB.
    Image,
    /// PDF, text and office documents, up to 100 MB.
    Document,
    /// `video/mp4`, `video/3gpp`, up to 16 MB.
    Video,
    /// AAC, AMR, MPEG, MP4 audio, OGG (Opus), up to 16 MB.
    Audio,
}

const MB: u64 = 1024 * 1024;

impl MediaKind {
    /// Parses `image`, `document`, `video`, `audio`.
    pub fn parse(field: &'static str, s: &str) -> Result<Self, ValidationError> {
        Ok(match s {
            "image" => MediaKind::Image,
            "document" => MediaKind::Document,
            "video" => MediaKind::Video,
            "audio" => MediaKind::Audio,
            _ => {
                return Err(ValidationError::new(
                    "invalid_media_type",
                    field,
                    "`media.type` deve ser image, document, video ou audio.",
                ))
            }
        })
    }

    /// The provider's `type` and the name of the payload object.
    pub fn as_str(self) -> &'static str {
        match self {
            MediaKind::Image => "image",
            MediaKind::Document => "document",
            MediaKind::Video => "video",
            MediaKind::Audio => "audio",
        }
    }

    /// The MIME types the provider accepts for this kind.
    pub fn mime_types(self) -> &'static [&'static str] {
        match self {
            MediaKind::Image => &["image/jpeg", "image/png"],
            MediaKind::Document => &[
                "text/plain",
                "application/pdf",
                "application/msword",
                "application/vnd.ms-excel",
                "application/vnd.ms-powerpoint",
                "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
                "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
                "application/vnd.openxmlformats-officedocument.presentationml.presentation",
            ],
            MediaKind::Video => &["video/mp4", "video/3gpp"],
            MediaKind::Audio => &[
                "audio/aac",
                "audio/amr",
                "audio/mpeg",
                "audio/mp4",
                "audio/ogg",
            ],
        }
    }

    /// The largest file of this kind, bytes.
    pub fn max_bytes(self) -> u64 {
        match self {
            MediaKind::Image => 5 * MB,
            MediaKind::Document => 100 * MB,
            MediaKind::Video | MediaKind::Audio => 16 * MB,
        }
    }

    /// Whether captions are allowed (image, video, document).
    pub fn takes_caption(self) -> bool {
        !matches!(self, MediaKind::Audio)
    }
}

/// The bare MIME type of a `Content-Type` value (`image/png; q=1` → `image/png`), lowercase.
pub fn bare_mime(content_type: &str) -> String {
    content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

/// A MIME type guessed from a file name's extension, for servers that answer
/// `application/octet-stream`.
pub fn mime_from_extension(path: &str) -> Option<&'static str> {
    let ext = path.rsplit('.').next()?.to_ascii_lowercase();
    Some(match ext.as_str() {
        "jpg" | "jpeg" => "image/jpeg",
        "png" => "image/png",
        "pdf" => "application/pdf",
        "txt" => "text/plain",
        "doc" => "application/msword",
        "docx" => "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "xls" => "application/vnd.ms-excel",
        "xlsx" => "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "ppt" => "application/vnd.ms-powerpoint",
        "pptx" => "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        "mp4" => "video/mp4",
        "3gp" => "video/3gpp",
        "mp3" => "audio/mpeg",
        "ogg" | "opus" => "audio/ogg",
        "aac" => "audio/aac",
        "amr" => "audio/amr",
        "m4a" => "audio/mp4",
        _ => return None,
    })
}

/// Checks a downloaded file against the kind's types and size.
pub fn check(kind: MediaKind, mime: &str, size: u64) -> Result<(), ValidationError> {
    if !kind.mime_types().contains(&mime) {
        return Err(ValidationError::new(
            "unsupported_media",
            "media.url",
            format!(
                "O arquivo é {mime}, que o provedor não aceita como {}: use {}.",
                kind.as_str(),
                kind.mime_types().join(", ")
            ),
        ));
    }
    if size == 0 || size > kind.max_bytes() {
        return Err(ValidationError::new(
            "media_too_large",
            "media.url",
            format!(
                "O arquivo tem {size} bytes; o limite do provedor para {} é {} MB.",
                kind.as_str(),
                kind.max_bytes() / MB
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_limits_per_kind() {
        assert!(check(MediaKind::Image, "image/png", 1000).is_ok());
        assert_eq!(
            check(MediaKind::Image, "image/gif", 1000).unwrap_err().code,
            "unsupported_media"
        );
        assert_eq!(
            check(MediaKind::Image, "image/png", 5 * MB + 1)
                .unwrap_err()
                .code,
            "media_too_large"
        );
        assert!(check(MediaKind::Document, "application/pdf", 99 * MB).is_ok());
        assert!(check(MediaKind::Audio, "audio/ogg", 10).is_ok());
        assert_eq!(bare_mime("Image/PNG; charset=x"), "image/png");
        assert_eq!(
            mime_from_extension("/a/b/file.PDF"),
            Some("application/pdf")
        );
    }
}
