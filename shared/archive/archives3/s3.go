// Package archives3 is the archive's adapter to S3: it writes and reads
// archive files (Parquet, through archiveparquet) under the bucket's
// Hive-style partitions, and reads, verifies and compacts whole partitions
// for the rotator (Partitions implements archive's partition port).
package archives3

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/ddbpipe/ddbpipe/shared/archive"
	"github.com/ddbpipe/ddbpipe/shared/archive/archiveparquet"
)

// PutObjectAPI is what writing the archive needs; *s3.Client satisfies it.
type PutObjectAPI interface {
	PutObject(ctx context.Context, in *s3.PutObjectInput, opts ...func(*s3.Options)) (*s3.PutObjectOutput, error)
}

// GetObjectAPI reads one object; *s3.Client satisfies it.
type GetObjectAPI interface {
	GetObject(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.Options)) (*s3.GetObjectOutput, error)
}

// ListObjectsAPI lists a prefix; *s3.Client satisfies it.
type ListObjectsAPI interface {
	ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, opts ...func(*s3.Options)) (*s3.ListObjectsV2Output, error)
}

var (
	_ PutObjectAPI   = (*s3.Client)(nil)
	_ GetObjectAPI   = (*s3.Client)(nil)
	_ ListObjectsAPI = (*s3.Client)(nil)
)

// Object metadata (x-amz-meta-*) set on every archive file.
const (
	MetaFirstSequence = "first-sequence"
	MetaLastSequence  = "last-sequence"
	MetaRows          = "rows"
	MetaSHA256        = "sha256" // hex SHA-256 of the object's bytes
	MetaSchema        = "schema"
)

// Writer writes the archiver's objects to the bucket: the archive's
// ObjectWriter over S3.
type Writer struct {
	S3     PutObjectAPI
	Bucket string
}

var _ archive.ObjectWriter = Writer{}

// WriteObject writes o as one Parquet file at o.Key
// (archiveparquet.EncodeObject), replacing any object there, with o's
// sequence range in its metadata.
func (w Writer) WriteObject(ctx context.Context, o archive.Object) (archive.File, error) {
	data, err := archiveparquet.MarshalObject(o)
	if err != nil {
		return archive.File{}, err
	}
	return put(ctx, w.S3, w.Bucket, o.Key, data, len(o.Rows), o.FirstSequence, o.LastSequence)
}

// PutRows encodes rows as Parquet and writes them to bucket/key, replacing
// any object there. It returns the file as the manifest records it.
func PutRows(ctx context.Context, api PutObjectAPI, bucket, key string, rows []archive.Row, first, last string) (archive.File, error) {
	data, err := archiveparquet.Marshal(rows)
	if err != nil {
		return archive.File{}, err
	}
	return put(ctx, api, bucket, key, data, len(rows), first, last)
}

// put writes the archive file data, of rows rows, to bucket/key.
func put(ctx context.Context, api PutObjectAPI, bucket, key string, data []byte, rows int, first, last string) (archive.File, error) {
	sum := sha256.Sum256(data)
	f := archive.File{Key: key, Rows: int64(rows), Bytes: int64(len(data)), SHA256: hex.EncodeToString(sum[:]),
		MinSequence: first, MaxSequence: last}
	_, err := api.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        aws.String(bucket),
		Key:           aws.String(key),
		Body:          bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))),
		ContentType:   aws.String(archiveparquet.ContentType),
		Metadata: map[string]string{
			MetaFirstSequence: first, MetaLastSequence: last,
			MetaRows: strconv.Itoa(rows), MetaSHA256: f.SHA256, MetaSchema: archiveparquet.SchemaVersion,
		},
	})
	if err != nil {
		return archive.File{}, fmt.Errorf("archives3: put s3://%s/%s: %w", bucket, key, err)
	}
	return f, nil
}

// ReadRows reads every row of the archive file at bucket/key.
func ReadRows(ctx context.Context, api GetObjectAPI, bucket, key string) ([]archive.Row, error) {
	out, err := api.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		return nil, fmt.Errorf("archives3: get s3://%s/%s: %w", bucket, key, err)
	}
	defer out.Body.Close()
	data, err := io.ReadAll(out.Body)
	if err != nil {
		return nil, fmt.Errorf("archives3: read s3://%s/%s: %w", bucket, key, err)
	}
	rows, err := archiveparquet.Unmarshal(data)
	if err != nil {
		return nil, fmt.Errorf("s3://%s/%s: %w", bucket, key, err)
	}
	return rows, nil
}

// ListFiles lists the objects under prefix (e.g. a partition's
// Prefix()), with their keys and sizes; rows and checksums are not known
// from a listing.
func ListFiles(ctx context.Context, api ListObjectsAPI, bucket, prefix string) ([]archive.File, error) {
	var files []archive.File
	p := s3.NewListObjectsV2Paginator(api, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("archives3: list s3://%s/%s: %w", bucket, prefix, err)
		}
		for _, o := range page.Contents {
			files = append(files, archive.File{Key: aws.ToString(o.Key), Bytes: aws.ToInt64(o.Size)})
		}
	}
	return files, nil
}

// quarantineFile is a quarantined record as it is stored: JSON, reasons
// first so an operator reads why before what.
type quarantineFile struct {
	Reasons        []string        `json:"reasons"`
	Table          string          `json:"table,omitempty"`
	SequenceNumber string          `json:"sequenceNumber,omitempty"`
	Record         json.RawMessage `json:"record"`
}

var _ archive.QuarantineWriter = Writer{}

// Quarantine writes q under archive.QuarantinePrefix at q.Key(), replacing
// any object there. A record that is not valid JSON is kept as a string.
func (w Writer) Quarantine(ctx context.Context, q archive.Quarantined) error {
	rec := json.RawMessage(q.Record)
	if !json.Valid(q.Record) {
		s, _ := json.Marshal(string(q.Record))
		rec = s
	}
	data, err := json.MarshalIndent(quarantineFile{Reasons: q.Reasons, Table: q.Table, SequenceNumber: q.SequenceNumber, Record: rec}, "", "  ")
	if err != nil {
		return fmt.Errorf("archives3: quarantine %s: %w", q.Key(), err)
	}
	key := q.Key()
	_, err = w.S3.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(w.Bucket), Key: aws.String(key), Body: bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))), ContentType: aws.String("application/json"),
	})
	if err != nil {
		return fmt.Errorf("archives3: put s3://%s/%s: %w", w.Bucket, key, err)
	}
	return nil
}
