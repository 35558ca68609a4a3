package archives3

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/ddbpipe/ddbpipe/shared/archive"
)

// RetirementsAPI is what Retirements reads; *s3.Client satisfies it.
type RetirementsAPI interface {
	GetObjectAPI
	ListObjectsAPI
}

// Retirements reads the rotator's record of the ledger months it retired:
// a month's manifest whose verification passed (archive.Contents.
// AlreadyRetired), the same record that stops the rotator creating the
// month's table again. It lists the manifest's key before reading it, so
// a month never retired costs one list, and a role needs no more than
// s3:ListBucket on the bucket and s3:GetObject on the partitions.
type Retirements struct {
	S3     RetirementsAPI
	Bucket string
	// Table is the archive's table of the ledger: the ledger tables'
	// prefix (<stack>-votes).
	Table string
}

// Retired reports whether month m was retired, and when its archive was
// verified.
func (r *Retirements) Retired(ctx context.Context, m string) (time.Time, bool, error) {
	p := archive.Partition{Table: r.Table, Month: m}
	key := p.ManifestKey()
	out, err := r.S3.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(r.Bucket), Prefix: aws.String(key), MaxKeys: aws.Int32(1)})
	if err != nil {
		return time.Time{}, false, fmt.Errorf("archives3: list s3://%s/%s: %w", r.Bucket, key, err)
	}
	if len(out.Contents) == 0 || aws.ToString(out.Contents[0].Key) != key {
		return time.Time{}, false, nil
	}
	b, err := getObject(ctx, r.S3, r.Bucket, key)
	if err != nil {
		return time.Time{}, false, err
	}
	man, err := archive.ParseManifest(b)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("archives3: s3://%s/%s: %w", r.Bucket, key, err)
	}
	if c := (archive.Contents{Manifest: &man}); !c.AlreadyRetired() {
		return time.Time{}, false, nil
	}
	return man.Verification.At, true, nil
}
