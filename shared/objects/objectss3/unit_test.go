package objectss3

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/ddbpipe/ddbpipe/shared/objects"
)

// fakeAPI is an API whose calls are function fields; unset ones panic.
type fakeAPI struct {
	put  func(*s3.PutObjectInput) (*s3.PutObjectOutput, error)
	get  func(*s3.GetObjectInput) (*s3.GetObjectOutput, error)
	head func(*s3.HeadObjectInput) (*s3.HeadObjectOutput, error)
	del  func(*s3.DeleteObjectInput) (*s3.DeleteObjectOutput, error)
	list func(*s3.ListObjectsV2Input) (*s3.ListObjectsV2Output, error)
	cp   func(*s3.CopyObjectInput) (*s3.CopyObjectOutput, error)
}

var _ API = (*fakeAPI)(nil)

func (f *fakeAPI) PutObject(_ context.Context, in *s3.PutObjectInput, _ ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	return f.put(in)
}

func (f *fakeAPI) GetObject(_ context.Context, in *s3.GetObjectInput, _ ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	return f.get(in)
}

func (f *fakeAPI) HeadObject(_ context.Context, in *s3.HeadObjectInput, _ ...func(*s3.Options)) (*s3.HeadObjectOutput, error) {
	return f.head(in)
}

func (f *fakeAPI) DeleteObject(_ context.Context, in *s3.DeleteObjectInput, _ ...func(*s3.Options)) (*s3.DeleteObjectOutput, error) {
	return f.del(in)
}

func (f *fakeAPI) ListObjectsV2(_ context.Context, in *s3.ListObjectsV2Input, _ ...func(*s3.Options)) (*s3.ListObjectsV2Output, error) {
	return f.list(in)
}

func (f *fakeAPI) CopyObject(_ context.Context, in *s3.CopyObjectInput, _ ...func(*s3.Options)) (*s3.CopyObjectOutput, error) {
	return f.cp(in)
}

func apiError(code string) error { return &smithy.GenericAPIError{Code: code, Message: "test"} }

// The exact PutObject request: write-once, with S3 checking the digest, and
// metadata S3 can carry (ASCII).
func TestPutObjectRequest(t *testing.T) {
	var got *s3.PutObjectInput
	body := []byte("hello")
	api := &fakeAPI{put: func(in *s3.PutObjectInput) (*s3.PutObjectOutput, error) {
		got = in
		return &s3.PutObjectOutput{VersionId: aws.String("v1")}, nil
	}}
	s := New(api, nil, "bucket")
	b := objects.Blob{Key: "blobs/k/w1", Body: body, SHA256: objects.SumOf(body), ContentType: "text/plain", ObjectKey: "relatórios/a b", WriteID: "w1"}
	ref, err := s.PutBlob(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct{ name, got, want string }{
		{"bucket", aws.ToString(got.Bucket), "bucket"},
		{"key", aws.ToString(got.Key), "blobs/k/w1"},
		{"If-None-Match", aws.ToString(got.IfNoneMatch), "*"},
		{"checksum", aws.ToString(got.ChecksumSHA256), b.SHA256.Base64()},
		{"content type", aws.ToString(got.ContentType), "text/plain"},
		{"meta object-key", got.Metadata[MetaObjectKey], "relat%C3%B3rios%2Fa%20b"},
		{"meta write-id", got.Metadata[MetaWriteID], "w1"},
		{"meta sha256", got.Metadata[MetaSHA256], b.SHA256.String()},
		{"meta codec", got.Metadata[MetaCodec], "identity"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, c.got, c.want)
		}
	}
	if aws.ToInt64(got.ContentLength) != 5 {
		t.Errorf("content length %d, want 5", aws.ToInt64(got.ContentLength))
	}
	want := objects.BlobRef{Bucket: "bucket", Key: "blobs/k/w1", VersionID: "v1", Size: 5, SHA256: b.SHA256, ContentType: "text/plain", Codec: objects.Identity}
	if ref != want {
		t.Errorf("ref %+v, want %+v", ref, want)
	}
}

// A server without conditional writes answers If-None-Match with
// NotImplemented: the put is sent again without it, and later puts skip it.
func TestPutFallsBackWithoutConditionalWrites(t *testing.T) {
	var calls []bool // whether each call carried If-None-Match
	api := &fakeAPI{put: func(in *s3.PutObjectInput) (*s3.PutObjectOutput, error) {
		calls = append(calls, in.IfNoneMatch != nil)
		if in.IfNoneMatch != nil {
			return nil, apiError("NotImplemented")
		}
		b, _ := io.ReadAll(in.Body)
		if string(b) != "body" {
			t.Errorf("retried with body %q", b)
		}
		return &s3.PutObjectOutput{}, nil
	}}
	s := New(api, nil, "bucket")
	for range 2 {
		if _, err := s.PutBlob(context.Background(), objects.Blob{Key: "k", Body: []byte("body"), SHA256: objects.SumOf([]byte("body"))}); err != nil {
			t.Fatal(err)
		}
	}
	if len(calls) != 3 || !calls[0] || calls[1] || calls[2] {
		t.Errorf("calls carried If-None-Match: %v, want [true false false]", calls)
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		code string
		want []error
	}{
		{"NoSuchKey", []error{objects.ErrBlobNotFound}},
		{"NoSuchVersion", []error{objects.ErrBlobNotFound}},
		{"NotFound", []error{objects.ErrBlobNotFound}},
		{"PreconditionFailed", []error{objects.ErrBlobExists}},
		{"ConditionalRequestConflict", []error{objects.ErrBlobExists}},
		{"SlowDown", []error{objects.ErrThrottled, objects.ErrNotApplied}},
		{"BadDigest", []error{objects.ErrChecksum, objects.ErrNotApplied}},
		{"InternalError", nil},
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			raw := apiError(tt.code)
			err := classify(raw)
			for _, w := range tt.want {
				if !errors.Is(err, w) {
					t.Errorf("errors.Is(%v, %v) = false", err, w)
				}
			}
			if !errors.Is(err, raw) {
				t.Errorf("%v does not wrap the S3 error", err)
			}
			if len(tt.want) == 0 && (errors.Is(err, objects.ErrNotApplied) || errors.Is(err, objects.ErrBlobNotFound)) {
				t.Errorf("%v: an unknown failure is classified", err)
			}
		})
	}
	// The SDK's typed errors carry the same codes.
	if !errors.Is(classify(&types.NoSuchKey{}), objects.ErrBlobNotFound) {
		t.Error("types.NoSuchKey is not ErrBlobNotFound")
	}
	if !errors.Is(classify(&types.NotFound{}), objects.ErrBlobNotFound) {
		t.Error("types.NotFound is not ErrBlobNotFound")
	}
}

// GetBlob fails before reading when S3's length or full-object checksum
// already disagrees with the reference, and closes the body.
func TestGetChecksEarly(t *testing.T) {
	body := []byte("twelve bytes")
	sum := objects.SumOf(body)
	tests := []struct {
		name     string
		length   int64
		checksum string
		want     error
	}{
		{"agrees", 12, sum.Base64(), nil},
		{"no checksum header", 12, "", nil},
		{"composite checksum ignored", 12, "abc-3", nil},
		{"length differs", 13, "", objects.ErrChecksum},
		{"checksum differs", 12, objects.SumOf([]byte("other")).Base64(), objects.ErrChecksum},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			closed := false
			api := &fakeAPI{get: func(in *s3.GetObjectInput) (*s3.GetObjectOutput, error) {
				if aws.ToString(in.VersionId) != "v9" {
					t.Errorf("version %q, want v9", aws.ToString(in.VersionId))
				}
				out := &s3.GetObjectOutput{Body: closer{strings.NewReader(string(body)), &closed}, ContentLength: aws.Int64(tt.length)}
				if tt.checksum != "" {
					out.ChecksumSHA256 = aws.String(tt.checksum)
				}
				return out, nil
			}}
			s := New(api, nil, "bucket")
			rc, err := s.GetBlob(context.Background(), objects.BlobRef{Key: "k", VersionID: "v9", Size: 12, SHA256: sum})
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			if err != nil {
				if !closed {
					t.Error("body not closed")
				}
				return
			}
			got, err := io.ReadAll(rc)
			rc.Close()
			if err != nil || string(got) != string(body) || !closed {
				t.Errorf("read %q, %v, closed %t", got, err, closed)
			}
		})
	}
}

type closer struct {
	io.Reader
	closed *bool
}

func (c closer) Close() error { *c.closed = true; return nil }

// The headers a presigned request must carry are returned without Host.
func TestPresignedHeaders(t *testing.T) {
	s := FromClient(s3.New(s3.Options{Region: "us-east-1", Credentials: aws.AnonymousCredentials{}}), "bucket")
	_, err := s.PresignPut(context.Background(), Upload{Key: "uploads/x", Size: 10, TTL: 0})
	if err == nil {
		t.Error("ttl 0 accepted")
	}
	if _, err := s.PresignPut(context.Background(), Upload{Key: "uploads/x", Size: 6 << 30, TTL: time.Minute}); err == nil {
		t.Error("a 6 GiB single PUT accepted")
	}
	if _, err := New(nil, nil, "b").PresignGet(context.Background(), objects.BlobRef{Key: "k"}, time.Minute); err == nil {
		t.Error("presigned without a presigner")
	}
	p := presigned(&v4.PresignedHTTPRequest{Method: http.MethodPut, URL: "http://s3/bucket/uploads/x?X-Amz-Signature=1",
		SignedHeader: http.Header{"Host": {"s3"}, "If-None-Match": {"*"}}}, time.Now())
	if p.Header.Get("Host") != "" || p.Header.Get("If-None-Match") != "*" {
		t.Errorf("headers %v", p.Header)
	}
	if p.Method != http.MethodPut {
		t.Errorf("method %s", p.Method)
	}
}
