package objects

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
)

// Compress gzips data (default level; no name or time in the header, so the
// output depends on data alone).
func Compress(data []byte) []byte {
	var buf bytes.Buffer
	buf.Grow(len(data)/2 + 64)
	zw := gzip.NewWriter(&buf) // the default level is valid: no error
	zw.Write(data)             // writes to a bytes.Buffer cannot fail
	zw.Close()
	return buf.Bytes()
}

// CompressedSize returns the gzip size of data, giving up (and returning
// limit+1) as soon as the output passes limit: a payload that does not
// compress costs about limit bytes of work, not its whole size.
func CompressedSize(data []byte, limit int) int {
	cw := &cappedWriter{limit: limit}
	zw := gzip.NewWriter(cw)
	const step = 64 << 10
	for off := 0; off < len(data); off += step {
		if _, err := zw.Write(data[off:min(off+step, len(data))]); err != nil {
			return limit + 1
		}
	}
	if err := zw.Close(); err != nil {
		return limit + 1
	}
	return cw.n
}

var errCapped = errors.New("objects: over the limit")

type cappedWriter struct{ n, limit int }

func (w *cappedWriter) Write(p []byte) (int, error) {
	w.n += len(p)
	if w.n > w.limit {
		return 0, errCapped
	}
	return len(p), nil
}

// Decode returns the document stored as data with codec, checked against
// its recorded size and SHA-256. A mismatch is a *ChecksumError; data that
// would expand past size stops there (no decompression bomb).
func Decode(what string, codec Codec, data []byte, size int64, sum Sum) ([]byte, error) {
	var doc []byte
	switch codec {
	case Identity, "":
		doc = data
	case Gzip:
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, &ChecksumError{What: what, Detail: "gzip header: " + err.Error()}
		}
		doc, err = io.ReadAll(io.LimitReader(zr, size+1))
		if err != nil {
			return nil, &ChecksumError{What: what, Detail: "gzip: " + err.Error()}
		}
	default:
		return nil, fmt.Errorf("objects: %s: unknown codec %q", what, codec)
	}
	if int64(len(doc)) != size {
		return nil, &ChecksumError{What: what, WantSize: size, GotSize: int64(len(doc))}
	}
	if got := SumOf(doc); got != sum {
		return nil, &ChecksumError{What: what, WantSize: size, GotSize: size, Want: sum, Got: got}
	}
	return doc, nil
}

// VerifyReader passes r through, and at its end checks that it gave exactly
// size bytes with the SHA-256 sum: instead of io.EOF, a reader that does
// not match returns a *ChecksumError, and one that runs past size returns it
// as soon as it does. Read it to the end: a caller that stops early has
// verified nothing.
func VerifyReader(what string, r io.Reader, size int64, sum Sum) io.Reader {
	return &verifyReader{what: what, r: r, size: size, sum: sum, h: sha256.New()}
}

type verifyReader struct {
	what string
	r    io.Reader
	size int64
	sum  Sum
	h    hash.Hash
	n    int64
	err  error
}

func (v *verifyReader) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	n, err := v.r.Read(p)
	v.n += int64(n)
	v.h.Write(p[:n])
	if v.n > v.size {
		v.err = &ChecksumError{What: v.what, WantSize: v.size, GotSize: v.n}
		return 0, v.err
	}
	if err == io.EOF {
		var got Sum
		v.h.Sum(got[:0])
		switch {
		case v.n != v.size:
			v.err = &ChecksumError{What: v.what, WantSize: v.size, GotSize: v.n}
		case got != v.sum:
			v.err = &ChecksumError{What: v.what, WantSize: v.size, GotSize: v.n, Want: v.sum, Got: got}
		default:
			v.err = io.EOF
		}
		if v.err != io.EOF {
			return 0, v.err // hold back the last bytes: they are part of bad data
		}
		return n, io.EOF
	}
	if err != nil {
		v.err = err
	}
	return n, err
}
