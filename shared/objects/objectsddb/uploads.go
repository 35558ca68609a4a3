package objectsddb

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbpipe/ddbpipe/shared/objects"
	"github.com/ddbpipe/ddbpipe/shared/platform/awserr"
)

var _ objects.Uploads = (*Uploads)(nil)

// Uploads keeps the objects domain's upload intents (objects.Uploads) in
// the objects table, one item per upload:
//
//	pk = upload#<id>   sk = u
//
// An object's key may be "upload#<id>" too (keys hold any character), but
// its items' sort keys are versions', so the item is never an object's;
// its sort key is not a version's (objects.ParseSortKey refuses it), so the
// reaper and the
// archiver, which read the table's stream, can tell it apart and skip it.
// The table's TTL attribute, expiresAt, removes the item once its outcome
// has been readable long enough.
//
// Attributes:
//
//	key          S  the object key
//	size         N  declared size
//	sha256       S  declared SHA-256, hex
//	contentType  S
//	ifMatch      N  the version the upload is based on (absent: none)
//	blob         M  {key: uploads/<hash>/<id>}: named the way version items
//	                name their blobs, so the orphan sweeper's reference scan
//	                protects the upload while its intent lives
//	multipartId  S  S3's multipart upload id (absent: a single PUT)
//	partSize     N, parts N
//	state        S  pending | committed | failed
//	version      N  committed: the version
//	unchanged    BOOL  committed: the latest version already held the document
//	                (nothing was written; version is that version)
//	reason       S, detail S, current N   failed: why
//	createdAt    S, deadline S   RFC 3339
//	expiresAt    N  epoch seconds (TTL)
//	claimedUntil N  epoch milliseconds: a finalizer's lease
type Uploads struct {
	api   *dynamodb.Client
	table string
}

// NewUploads returns the upload intents of the objects table.
func NewUploads(api *dynamodb.Client, table string) *Uploads { return &Uploads{api: api, table: table} }

// UploadPartitionPrefix and UploadSortKey name upload items.
const (
	UploadPartitionPrefix = "upload#"
	UploadSortKey         = "u"
)

// IsUploadItem reports whether a table key is an upload item's.
func IsUploadItem(pk, sk string) bool {
	return sk == UploadSortKey && len(pk) > len(UploadPartitionPrefix) && strings.HasPrefix(pk, UploadPartitionPrefix)
}

func uploadKey(id string) map[string]types.AttributeValue {
	return key(UploadPartitionPrefix+id, UploadSortKey)
}

// uploadItem is an upload item as the table holds it (the attributes
// above), marshalled with attributevalue.
type uploadItem struct {
	PK           string    `dynamodbav:"pk"`
	SK           string    `dynamodbav:"sk"`
	Key          string    `dynamodbav:"key"`
	Size         int64     `dynamodbav:"size"`
	SHA256       string    `dynamodbav:"sha256"`
	ContentType  string    `dynamodbav:"contentType"`
	IfMatch      *int64    `dynamodbav:"ifMatch,omitempty"`
	Blob         blobName  `dynamodbav:"blob"`
	MultipartID  string    `dynamodbav:"multipartId,omitempty"`
	PartSize     int64     `dynamodbav:"partSize,omitempty"`
	Parts        int       `dynamodbav:"parts,omitempty"`
	State        string    `dynamodbav:"state"`
	Version      int64     `dynamodbav:"version,omitempty"`
	Unchanged    bool      `dynamodbav:"unchanged,omitempty"`
	Reason       string    `dynamodbav:"reason,omitempty"`
	Detail       string    `dynamodbav:"detail,omitempty"`
	Current      int64     `dynamodbav:"current,omitempty"`
	CreatedAt    string    `dynamodbav:"createdAt"`
	Deadline     string    `dynamodbav:"deadline"`
	ExpiresAt    time.Time `dynamodbav:"expiresAt,unixtime"`
	ClaimedUntil *int64    `dynamodbav:"claimedUntil,omitempty"` // epoch milliseconds
}

// blobName names a blob the way version items do (blob.key).
type blobName struct {
	Key string `dynamodbav:"key"`
}

func encodeUpload(u objects.Upload) (map[string]types.AttributeValue, error) {
	it := uploadItem{
		PK: UploadPartitionPrefix + u.ID, SK: UploadSortKey,
		Key: u.Key, Size: u.Size, SHA256: u.SHA256.String(), ContentType: u.ContentType, IfMatch: u.IfMatch,
		Blob: blobName{Key: u.BlobKey}, State: string(u.State),
		CreatedAt: u.CreatedAt.UTC().Format(time.RFC3339Nano), Deadline: u.Deadline.UTC().Format(time.RFC3339Nano),
		ExpiresAt: u.ExpiresAt,
	}
	if u.MultipartID != "" {
		it.MultipartID, it.PartSize, it.Parts = u.MultipartID, u.PartSize, u.Parts
	}
	item, err := attributevalue.MarshalMap(it)
	if err != nil {
		return nil, fmt.Errorf("objectsddb: upload %s: %w", u.ID, err)
	}
	return item, nil
}

func decodeUpload(item map[string]types.AttributeValue) (objects.Upload, error) {
	var it uploadItem
	if err := attributevalue.UnmarshalMap(item, &it); err != nil {
		return objects.Upload{}, fmt.Errorf("objectsddb: upload item: %w", err)
	}
	if !IsUploadItem(it.PK, it.SK) {
		return objects.Upload{}, fmt.Errorf("objectsddb: item %q/%q is not an upload", it.PK, it.SK)
	}
	u := objects.Upload{
		ID: it.PK[len(UploadPartitionPrefix):], Key: it.Key, Size: it.Size, ContentType: it.ContentType, IfMatch: it.IfMatch,
		BlobKey: it.Blob.Key, MultipartID: it.MultipartID, PartSize: it.PartSize, Parts: it.Parts,
		State: objects.UploadState(it.State), Version: it.Version, Unchanged: it.Unchanged, Reason: it.Reason, Detail: it.Detail, Current: it.Current,
	}
	var errs []error
	var err error
	if u.SHA256, err = objects.ParseSum(it.SHA256); err != nil {
		errs = append(errs, err)
	}
	if u.CreatedAt, err = time.Parse(time.RFC3339Nano, it.CreatedAt); err != nil {
		errs = append(errs, fmt.Errorf("createdAt: %w", err))
	}
	if u.Deadline, err = time.Parse(time.RFC3339Nano, it.Deadline); err != nil {
		errs = append(errs, fmt.Errorf("deadline: %w", err))
	}
	if _, ok := item["expiresAt"]; ok {
		u.ExpiresAt = it.ExpiresAt.UTC()
	}
	if it.ClaimedUntil != nil {
		u.ClaimedUntil = time.UnixMilli(*it.ClaimedUntil).UTC()
	}
	if len(errs) > 0 {
		return u, fmt.Errorf("objectsddb: upload %s: %w", u.ID, errors.Join(errs...))
	}
	return u, nil
}

// CreateUpload implements objects.Uploads.
func (s *Uploads) CreateUpload(ctx context.Context, u objects.Upload) error {
	item, err := encodeUpload(u)
	if err != nil {
		return err
	}
	_, err = s.api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.table), Item: item,
		ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames: map[string]string{"#pk": attrPK},
	})
	if awserr.IsConditionFailed(err) {
		return fmt.Errorf("objectsddb: create upload %s: %w", u.ID, objects.ErrUploadExists)
	}
	if err != nil {
		return fmt.Errorf("objectsddb: create upload %s: %w", u.ID, classify(err))
	}
	return nil
}

// GetUpload implements objects.Uploads.
func (s *Uploads) GetUpload(ctx context.Context, id string) (objects.Upload, bool, error) {
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), Key: uploadKey(id), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return objects.Upload{}, false, fmt.Errorf("objectsddb: get upload %s: %w", id, classify(err))
	}
	if len(out.Item) == 0 {
		return objects.Upload{}, false, nil
	}
	u, err := decodeUpload(out.Item)
	return u, err == nil, err
}

// ClaimUpload implements objects.Uploads with one conditional update: the
// lease is taken only from a pending upload whose lease is over.
func (s *Uploads) ClaimUpload(ctx context.Context, id string, now, until time.Time) (objects.Upload, bool, error) {
	claimed := expression.Name("claimedUntil")
	cond := expression.AttributeExists(expression.Name(attrPK)).
		And(expression.Name("state").Equal(expression.Value(string(objects.UploadPending)))).
		And(expression.Or(expression.AttributeNotExists(claimed), claimed.LessThan(expression.Value(now.UnixMilli()))))
	expr, err := expression.NewBuilder().
		WithUpdate(expression.Set(claimed, expression.Value(until.UnixMilli()))).
		WithCondition(cond).
		Build()
	if err != nil {
		return objects.Upload{}, false, fmt.Errorf("objectsddb: claim upload %s: %w", id, err)
	}
	out, err := s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table), Key: uploadKey(id),
		UpdateExpression: expr.Update(), ConditionExpression: expr.Condition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		u, err := decodeUpload(out.Attributes)
		return u, err == nil, err
	}
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) { // the typed error: it carries the item as it is
		return objects.Upload{}, false, fmt.Errorf("objectsddb: claim upload %s: %w", id, classify(err))
	}
	if len(ccf.Item) == 0 {
		return objects.Upload{}, false, fmt.Errorf("objectsddb: claim upload %s: %w", id, objects.ErrNotFound)
	}
	u, err := decodeUpload(ccf.Item)
	if err != nil {
		return objects.Upload{}, false, err
	}
	if u.State == objects.UploadPending {
		return u, false, fmt.Errorf("objectsddb: claim upload %s: held until %s: %w", id, u.ClaimedUntil.Format(time.RFC3339), objects.ErrUploadBusy)
	}
	return u, false, nil
}

// SettleUpload implements objects.Uploads: the outcome is written only on
// a pending upload, and its lease is dropped.
func (s *Uploads) SettleUpload(ctx context.Context, u objects.Upload) error {
	upd := expression.Set(expression.Name("state"), expression.Value(string(u.State))).
		Set(expression.Name("version"), expression.Value(u.Version)).
		Set(expression.Name("unchanged"), expression.Value(u.Unchanged)).
		Set(expression.Name("current"), expression.Value(u.Current)).
		Set(expression.Name("reason"), expression.Value(u.Reason)).
		Set(expression.Name("detail"), expression.Value(u.Detail)).
		Remove(expression.Name("claimedUntil"))
	cond := expression.Name("state").Equal(expression.Value(string(objects.UploadPending)))
	expr, err := expression.NewBuilder().WithUpdate(upd).WithCondition(cond).Build()
	if err != nil {
		return fmt.Errorf("objectsddb: settle upload %s: %w", u.ID, err)
	}
	_, err = s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table), Key: uploadKey(u.ID),
		UpdateExpression: expr.Update(), ConditionExpression: expr.Condition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	})
	if err != nil && !awserr.IsConditionFailed(err) {
		return fmt.Errorf("objectsddb: settle upload %s: %w", u.ID, classify(err))
	}
	return nil
}
