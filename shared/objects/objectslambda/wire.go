package objectslambda

import (
	"time"

	"github.com/ddbpipe/ddbpipe/shared/objects"
)

// The JSON the API speaks (the client package uses these types too).

// Meta is a version's metadata.
type Meta struct {
	Key         string    `json:"key"`
	Version     int64     `json:"version"`
	Size        int64     `json:"size"`
	SHA256      string    `json:"sha256"`
	ContentType string    `json:"contentType"`
	Kind        string    `json:"kind"`
	Codec       string    `json:"codec"`
	Modified    time.Time `json:"modified"`
}

func meta(r objects.Record) Meta {
	return Meta{
		Key: r.Key, Version: r.Version, Size: r.Size, SHA256: r.SHA256.String(), ContentType: r.ContentType,
		Kind: string(r.Kind), Codec: string(r.Codec), Modified: r.CreatedAt.UTC(),
	}
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

// ErrorBody is every error's body.
type ErrorBody struct {
	Error          string `json:"error"`
	Message        string `json:"message"`
	CurrentVersion *int64 `json:"currentVersion,omitempty"` // conflicts
	Deleted        bool   `json:"deleted,omitempty"`        // conflicts with a deleted object
}

// UploadRequest is POST …/uploads.
type UploadRequest struct {
	Size        *int64 `json:"size"`
	SHA256      string `json:"sha256"`
	ContentType string `json:"contentType,omitempty"`
	IfMatch     *int64 `json:"ifMatch,omitempty"`
}

// UploadStatus is an upload's state, as GET …/uploads/{id} shows it.
type UploadStatus struct {
	ID             string    `json:"uploadId"`
	Key            string    `json:"key"`
	State          string    `json:"state"`             // pending | committed | failed
	Version        int64     `json:"version,omitempty"` // committed
	Reason         string    `json:"reason,omitempty"`  // failed
	Message        string    `json:"message,omitempty"` // failed
	CurrentVersion *int64    `json:"currentVersion,omitempty"`
	Size           int64     `json:"size"`
	SHA256         string    `json:"sha256"`
	ContentType    string    `json:"contentType"`
	Deadline       time.Time `json:"deadline"` // upload (and complete) before this
	Status         string    `json:"status"`   // the path of this resource
}

func status(u objects.Upload) UploadStatus {
	s := UploadStatus{
		ID: u.ID, Key: u.Key, State: string(u.State), Version: u.Version, Reason: u.Reason, Message: u.Detail,
		Size: u.Size, SHA256: u.SHA256.String(), ContentType: u.ContentType, Deadline: u.Deadline.UTC(),
		Status: uploadPath(u.Key, u.ID),
	}
	if u.Reason == objects.UploadFailedConflict {
		cur := u.Current
		s.CurrentVersion = &cur
	}
	return s
}

// Granted is POST …/uploads' answer: Put for a single PUT, Multipart for
// parts.
type Granted struct {
	UploadStatus
	Put       *objects.SignedRequest `json:"put,omitempty"`
	Multipart *Multipart             `json:"multipart,omitempty"`
}

// Multipart is how to send a multipart upload: part i (from 1) is bytes
// [(i-1)×PartSize, i×PartSize) sent to Parts[i-1]; then POST Complete with
// the ETags S3 returned.
type Multipart struct {
	PartSize int64                   `json:"partSize"`
	Parts    []objects.SignedRequest `json:"parts"`
	Complete string                  `json:"complete"`
}

// CompleteRequest is POST …/uploads/{id}/complete.
type CompleteRequest struct {
	Parts []objects.Part `json:"parts"`
}
