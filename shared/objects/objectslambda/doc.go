// Package objectslambda is the objects flow's Lambda handlers and their
// Setups: the HTTP API's /objects routes (HTTP), the bucket's
// ObjectCreated events that finalize presigned uploads (Finalize), the
// table's stream whose removed versions free their payloads (Reaper), and
// the schedule of the orphan sweeper (Sweeper). All are adapters: the
// event is read, the objects domain does the work, and errors become
// responses in one place (HTTP.fail, Finalize.Handle, Reaper.report,
// Sweeper.report).
//
// The HTTP API's contract (routes, headers, status codes, JSON bodies) is
// package objectsapi.
//
// # Metrics (EMF, namespace ddbpipe)
//
// PlacedInline, PlacedCompressed, PlacedChunked, PlacedS3 (writes by
// placement), BytesOffloaded (bytes written to S3), Conflicts,
// ChecksumFailures, UploadsGranted, UploadsCommitted, UploadsFailed,
// WritesUnchanged (PUTs and uploads that found the document already the
// latest version, and wrote nothing).
package objectslambda
