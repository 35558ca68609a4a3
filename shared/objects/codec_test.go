package objects

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestCompressDecode(t *testing.T) {
	tests := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"text", []byte(strings.Repeat("the quick brown fox ", 500))},
		{"random", randomBytes(10_000, 3)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			z := Compress(tt.data)
			if !bytes.Equal(z, Compress(tt.data)) {
				t.Error("Compress is not deterministic")
			}
			got, err := Decode("doc", Gzip, z, int64(len(tt.data)), SumOf(tt.data))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, tt.data) {
				t.Error("Decode(Compress(data)) differs from data")
			}
		})
	}
}

func TestDecodeRejects(t *testing.T) {
	doc := []byte(strings.Repeat("abc", 1000))
	z := Compress(doc)
	sum := SumOf(doc)
	flipped := bytes.Clone(z)
	flipped[len(flipped)/2] ^= 0x55
	bomb := Compress(make([]byte, 10<<20))
	tests := []struct {
		name  string
		codec Codec
		data  []byte
		size  int64
		sum   Sum
	}{
		{"identity wrong digest", Identity, doc, int64(len(doc)), SumOf([]byte("other"))},
		{"identity wrong size", Identity, doc[:10], int64(len(doc)), sum},
		{"gzip corrupt body", Gzip, flipped, int64(len(doc)), sum},
		{"gzip not gzip", Gzip, doc, int64(len(doc)), sum},
		{"gzip truncated", Gzip, z[:len(z)-10], int64(len(doc)), sum},
		{"gzip expands past its size (bomb)", Gzip, bomb, 100, sum},
		{"gzip wrong digest", Gzip, z, int64(len(doc)), SumOf(nil)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Decode("doc", tt.codec, tt.data, tt.size, tt.sum)
			if !errors.Is(err, ErrChecksum) {
				t.Fatalf("got %v, want ErrChecksum", err)
			}
			if got != nil {
				t.Error("Decode returned data with an error")
			}
		})
	}
	if _, err := Decode("doc", "zstd", doc, int64(len(doc)), sum); err == nil {
		t.Error("unknown codec accepted")
	}
}

func TestVerifyReader(t *testing.T) {
	data := randomBytes(100_000, 11)
	sum := SumOf(data)
	tests := []struct {
		name    string
		r       io.Reader
		size    int64
		sum     Sum
		wantErr bool
	}{
		{"good", bytes.NewReader(data), int64(len(data)), sum, false},
		{"good, one byte at a time", iotest.OneByteReader(bytes.NewReader(data)), int64(len(data)), sum, false},
		{"good, data with EOF", iotest.DataErrReader(bytes.NewReader(data)), int64(len(data)), sum, false},
		{"empty", bytes.NewReader(nil), 0, SumOf(nil), false},
		{"short", bytes.NewReader(data[:len(data)-1]), int64(len(data)), sum, true},
		{"long", bytes.NewReader(append(bytes.Clone(data), 0)), int64(len(data)), sum, true},
		{"flipped bit", bytes.NewReader(append(bytes.Clone(data[:500]), append([]byte{data[500] ^ 1}, data[501:]...)...)), int64(len(data)), sum, true},
		{"flipped bit, data with EOF", iotest.DataErrReader(bytes.NewReader(append([]byte{data[0] ^ 1}, data[1:]...))), int64(len(data)), sum, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := io.ReadAll(VerifyReader("blob", tt.r, tt.size, tt.sum))
			if tt.wantErr {
				if !errors.Is(err, ErrChecksum) {
					t.Fatalf("got %v, want ErrChecksum", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, data[:tt.size]) {
				t.Error("bytes differ")
			}
		})
	}
	// A read error from below is passed through, not turned into a mismatch.
	boom := errors.New("connection reset")
	_, err := io.ReadAll(VerifyReader("blob", iotest.ErrReader(boom), 10, sum))
	if !errors.Is(err, boom) || errors.Is(err, ErrChecksum) {
		t.Errorf("got %v, want the reader's own error", err)
	}
}
