package bwrap

// ImageCopied reports whether s's workspace is a copy of its image's working
// directory (not an overlay of it).
func ImageCopied(s *Sandbox) bool { return s.img != nil && s.img.copied }
