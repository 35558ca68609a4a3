package objectsapi

import (
	"fmt"
	"net/http"
	"time"
)

// DefaultContentType is the Content-Type of a document PUT without one.
const DefaultContentType = "application/octet-stream"

// HeaderUnchanged is set, to "true", on a PUT's 200 answer when the latest
// version already held the document (the same SHA-256, size and content
// type), so nothing was written: the answer names that version. A retried
// PUT whose first attempt committed gets this answer.
const HeaderUnchanged = "X-Object-Unchanged"

// Meta is a version's metadata: the answer to PUT, and each entry of
// VersionList.
type Meta struct {
	Key         string    `json:"key"`
	Version     int64     `json:"version"`
	Size        int64     `json:"size"`
	SHA256      string    `json:"sha256"`
	ContentType string    `json:"contentType"`
	Kind        string    `json:"kind"`  // inline | compressed | chunked | s3
	Codec       string    `json:"codec"` // identity | gzip
	Modified    time.Time `json:"modified"`
	// Unchanged (PUT only) mirrors HeaderUnchanged: nothing was written,
	// the latest version already held the document.
	Unchanged bool `json:"unchanged,omitempty"`
}

// Listing is GET /objects?prefix=P[&delimiter=D][&limit=N][&cursor=C]:
// the latest version of each live object under the prefix, in byte order
// of the keys, and with a delimiter the common prefixes (each once, in
// byte order). Cursor continues the listing; it is absent on the last page.
type Listing struct {
	Prefix         string   `json:"prefix"`
	Delimiter      string   `json:"delimiter,omitempty"`
	Objects        []Entry  `json:"objects"`
	CommonPrefixes []string `json:"commonPrefixes,omitempty"`
	Cursor         string   `json:"cursor,omitempty"`
}

// Entry is one object of a Listing.
type Entry struct {
	Key         string    `json:"key"`
	Version     int64     `json:"version"`
	Size        int64     `json:"size"`
	SHA256      string    `json:"sha256"`
	ContentType string    `json:"contentType"`
	Modified    time.Time `json:"modified"`
}

// VersionList is GET …/versions, newest first.
type VersionList struct {
	Key      string `json:"key"`
	Versions []Meta `json:"versions"`
}

// Deleted is DELETE's answer: the version that was deleted.
type Deleted struct {
	Key     string `json:"key"`
	Version int64  `json:"deletedVersion"`
}

// Link is the body of a 303 to a presigned download.
type Link struct {
	URL         string    `json:"url"`
	ExpiresAt   time.Time `json:"expiresAt"`
	Size        int64     `json:"size"`
	SHA256      string    `json:"sha256"`
	Version     int64     `json:"version"`
	ContentType string    `json:"contentType"`
}

// Reasons of the objects API itself (apigw.ErrorBody.Error), beside the
// edge's own (apigw.Reason…: internal, not-found, throttled, too-large,
// bad-body, missing-body, invalid-json) and the key and input rules'
// reasons of the objects domain (empty-key, key-not-utf8, too-large,
// bad-sha256, …).
const (
	ReasonBadIfMatch    = "bad-if-match"
	ReasonBadPlacement  = "bad-placement"
	ReasonNoMethod      = "method-not-allowed"
	ReasonConflict      = "conflict"
	ReasonChecksum      = "checksum-mismatch"
	ReasonUnsupportedIf = "unsupported-precondition"
	ReasonBadQuery      = "bad-query"
)

// UploadRequest is POST …/uploads.
type UploadRequest struct {
	Size        *int64 `json:"size"`
	SHA256      string `json:"sha256"`
	ContentType string `json:"contentType,omitempty"`
	IfMatch     *int64 `json:"ifMatch,omitempty"`
}

// Upload states (UploadStatus.State).
const (
	StatePending   = "pending"
	StateCommitted = "committed"
	StateFailed    = "failed"
)

// UploadStatus is an upload's state, as GET …?uploadId=ID shows it.
type UploadStatus struct {
	ID             string    `json:"uploadId"`
	Key            string    `json:"key"`
	State          string    `json:"state"`               // pending | committed | failed
	Version        int64     `json:"version,omitempty"`   // committed
	Unchanged      bool      `json:"unchanged,omitempty"` // committed: the latest version already held the document; nothing was written
	Reason         string    `json:"reason,omitempty"`    // failed
	Message        string    `json:"message,omitempty"`   // failed
	CurrentVersion *int64    `json:"currentVersion,omitempty"`
	Size           int64     `json:"size"`
	SHA256         string    `json:"sha256"`
	ContentType    string    `json:"contentType"`
	Deadline       time.Time `json:"deadline"` // upload (and complete) before this
	Status         string    `json:"status"`   // the path of this resource
}

// SignedRequest is a request the client makes without credentials: the
// method, the URL and the headers it must send as they are (they are
// signed), until ExpiresAt.
type SignedRequest struct {
	Method  string      `json:"method"`
	URL     string      `json:"url"`
	Header  http.Header `json:"headers,omitempty"`
	Expires time.Time   `json:"expiresAt"`
}

// Granted is POST …?uploads' answer: Put for a single PUT, Multipart for
// parts.
type Granted struct {
	UploadStatus
	Put       *SignedRequest `json:"put,omitempty"`
	Multipart *Multipart     `json:"multipart,omitempty"`
}

// Multipart is how to send a multipart upload: part i (from 1) is bytes
// [(i-1)×PartSize, i×PartSize) sent to Parts[i-1]; then POST Complete with
// the ETags S3 returned.
type Multipart struct {
	PartSize int64           `json:"partSize"`
	Parts    []SignedRequest `json:"parts"`
	Complete string          `json:"complete"`
}

// Part is a finished part of a multipart upload, as the client reports it.
type Part struct {
	Number int32  `json:"partNumber"`
	ETag   string `json:"etag"`
}

// CompleteRequest is POST …?uploadId=ID.
type CompleteRequest struct {
	Parts []Part `json:"parts"`
}

// Reasons of range requests (apigw.ErrorBody.Error): 400 for a malformed Range,
// 416 for one the API will not serve (with Content-Range: bytes */<size>).
const (
	ReasonBadRange            = "bad-range"
	ReasonMultipleRanges      = "multiple-ranges"
	ReasonRangeNotSatisfiable = "range-not-satisfiable"
)

// ContentRange is the Content-Range of a 206 holding bytes [start, end) of
// a document of size bytes: "bytes <first>-<last>/<size>".
func ContentRange(start, end, size int64) string {
	return fmt.Sprintf("bytes %d-%d/%d", start, end-1, size)
}

// ParseContentRange reads a 206's Content-Range ("bytes a-b/size") into
// [start, end) and size.
func ParseContentRange(v string) (start, end, size int64, err error) {
	var first, last int64
	if _, err := fmt.Sscanf(v, "bytes %d-%d/%d", &first, &last, &size); err != nil || first < 0 || last < first || size <= last {
		return 0, 0, 0, fmt.Errorf("objects API: Content-Range %q: want bytes first-last/size", v)
	}
	if v != ContentRange(first, last+1, size) {
		return 0, 0, 0, fmt.Errorf("objects API: Content-Range %q: want bytes first-last/size", v)
	}
	return first, last + 1, size, nil
}
