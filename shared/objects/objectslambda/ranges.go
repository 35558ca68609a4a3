package objectslambda

// ifRange reports whether a range may be served given If-Range (RFC 9110,
// section 13.1.5): with no If-Range, always; with our ETag (the version,
// "n"), only if it is the version being read. A date, a weak or another
// tag means the client's copy may differ: the whole document is sent.
func ifRange(v string, version int64) bool {
	return v == "" || v == etag(version)
}
