package objectsddb

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbpipe/ddbpipe/shared/objects"
)

// UploadsAPI is the part of the DynamoDB client Uploads uses;
// *dynamodb.Client satisfies it.
type UploadsAPI interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

var (
	_ UploadsAPI      = (*dynamodb.Client)(nil)
	_ objects.Uploads = (*Uploads)(nil)
)

// Uploads keeps the objects domain's upload intents (objects.Uploads) in
// the objects table, one item per upload:
//
//	pk = upload#<id>   sk = u
//
// Object keys never hold '#', and chunk items have three '#'-separated
// parts, so an upload's partition is nobody else's; its sort key is not a
// version's (objects.ParseSortKey refuses it), so the reaper and the
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
//	reason       S, detail S, current N   failed: why
//	createdAt    S, deadline S   RFC 3339
//	expiresAt    N  epoch seconds (TTL)
//	claimedUntil N  epoch milliseconds: a finalizer's lease
type Uploads struct {
	api   UploadsAPI
	table string
}

// NewUploads returns the upload intents of the objects table.
func NewUploads(api UploadsAPI, table string) *Uploads { return &Uploads{api: api, table: table} }

// UploadPartitionPrefix and UploadSortKey name upload items.
const (
	UploadPartitionPrefix = "upload#"
	UploadSortKey         = "u"
)

// IsUploadItem reports whether a table key is an upload item's.
func IsUploadItem(pk, sk string) bool {
	return sk == UploadSortKey && len(pk) > len(UploadPartitionPrefix) && pk[:len(UploadPartitionPrefix)] == UploadPartitionPrefix
}

func uploadKey(id string) map[string]types.AttributeValue {
	return key(UploadPartitionPrefix+id, UploadSortKey)
}

func isCondFailed(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	return errors.As(err, &ccf)
}

func encodeUpload(u objects.Upload) map[string]types.AttributeValue {
	item := uploadKey(u.ID)
	item["key"] = str(u.Key)
	item["size"] = num(u.Size)
	item["sha256"] = str(u.SHA256.String())
	item["contentType"] = str(u.ContentType)
	if u.IfMatch != nil {
		item["ifMatch"] = num(*u.IfMatch)
	}
	item["blob"] = &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"key": str(u.BlobKey)}}
	if u.MultipartID != "" {
		item["multipartId"] = str(u.MultipartID)
		item["partSize"] = num(u.PartSize)
		item["parts"] = num(int64(u.Parts))
	}
	item["state"] = str(string(u.State))
	item["createdAt"] = str(u.CreatedAt.UTC().Format(time.RFC3339Nano))
	item["deadline"] = str(u.Deadline.UTC().Format(time.RFC3339Nano))
	item["expiresAt"] = num(u.ExpiresAt.Unix())
	return item
}

func decodeUpload(item map[string]types.AttributeValue) (objects.Upload, error) {
	var u objects.Upload
	var errs []error
	s := func(name string) string {
		if v, ok := item[name].(*types.AttributeValueMemberS); ok {
			return v.Value
		}
		return ""
	}
	n := func(name string) (int64, bool) {
		v, ok := item[name].(*types.AttributeValueMemberN)
		if !ok {
			return 0, false
		}
		x, err := strconv.ParseInt(v.Value, 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
		return x, true
	}
	t := func(name string) time.Time {
		x, err := time.Parse(time.RFC3339Nano, s(name))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
		return x
	}
	pk := s("pk")
	if !IsUploadItem(pk, s("sk")) {
		return u, fmt.Errorf("objectsddb: item %q/%q is not an upload", pk, s("sk"))
	}
	u.ID = pk[len(UploadPartitionPrefix):]
	u.Key = s("key")
	u.Size, _ = n("size")
	sum, err := objects.ParseSum(s("sha256"))
	if err != nil {
		errs = append(errs, err)
	}
	u.SHA256 = sum
	u.ContentType = s("contentType")
	if v, ok := n("ifMatch"); ok {
		u.IfMatch = &v
	}
	if b, ok := item["blob"].(*types.AttributeValueMemberM); ok {
		if k, ok := b.Value["key"].(*types.AttributeValueMemberS); ok {
			u.BlobKey = k.Value
		}
	}
	u.MultipartID = s("multipartId")
	u.PartSize, _ = n("partSize")
	parts, _ := n("parts")
	u.Parts = int(parts)
	u.State = objects.UploadState(s("state"))
	u.Version, _ = n("version")
	u.Reason, u.Detail = s("reason"), s("detail")
	u.Current, _ = n("current")
	u.CreatedAt, u.Deadline = t("createdAt"), t("deadline")
	if v, ok := n("expiresAt"); ok {
		u.ExpiresAt = time.Unix(v, 0).UTC()
	}
	if v, ok := n("claimedUntil"); ok {
		u.ClaimedUntil = time.UnixMilli(v).UTC()
	}
	if len(errs) > 0 {
		return u, fmt.Errorf("objectsddb: upload %s: %w", u.ID, errors.Join(errs...))
	}
	return u, nil
}

// CreateUpload implements objects.Uploads.
func (s *Uploads) CreateUpload(ctx context.Context, u objects.Upload) error {
	_, err := s.api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.table), Item: encodeUpload(u),
		ConditionExpression: aws.String("attribute_not_exists(pk)"),
	})
	if isCondFailed(err) {
		return fmt.Errorf("objectsddb: create %s: %w", u.ID, objects.ErrUploadExists)
	}
	if err != nil {
		return fmt.Errorf("objectsddb: create %s: %w", u.ID, classify(err))
	}
	return nil
}

// GetUpload implements objects.Uploads.
func (s *Uploads) GetUpload(ctx context.Context, id string) (objects.Upload, bool, error) {
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), Key: uploadKey(id), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return objects.Upload{}, false, fmt.Errorf("objectsddb: get %s: %w", id, classify(err))
	}
	if len(out.Item) == 0 {
		return objects.Upload{}, false, nil
	}
	u, err := decodeUpload(out.Item)
	return u, err == nil, err
}

// ClaimUpload implements objects.Uploads with one conditional update.
func (s *Uploads) ClaimUpload(ctx context.Context, id string, now, until time.Time) (objects.Upload, bool, error) {
	out, err := s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table), Key: uploadKey(id),
		UpdateExpression:         aws.String("SET claimedUntil = :until"),
		ConditionExpression:      aws.String("attribute_exists(pk) AND #state = :pending AND (attribute_not_exists(claimedUntil) OR claimedUntil < :now)"),
		ExpressionAttributeNames: map[string]string{"#state": "state"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":until": num(until.UnixMilli()), ":now": num(now.UnixMilli()), ":pending": str(string(objects.UploadPending)),
		},
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		u, err := decodeUpload(out.Attributes)
		return u, err == nil, err
	}
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return objects.Upload{}, false, fmt.Errorf("objectsddb: claim %s: %w", id, classify(err))
	}
	if len(ccf.Item) == 0 {
		return objects.Upload{}, false, fmt.Errorf("objectsddb: claim %s: %w", id, objects.ErrNotFound)
	}
	u, err := decodeUpload(ccf.Item)
	if err != nil {
		return objects.Upload{}, false, err
	}
	if u.State == objects.UploadPending {
		return u, false, fmt.Errorf("objectsddb: claim %s: held until %s: %w", id, u.ClaimedUntil.Format(time.RFC3339), objects.ErrUploadBusy)
	}
	return u, false, nil
}

// SettleUpload implements objects.Uploads.
func (s *Uploads) SettleUpload(ctx context.Context, u objects.Upload) error {
	vals := map[string]types.AttributeValue{
		":state": str(string(u.State)), ":pending": str(string(objects.UploadPending)),
		":version": num(u.Version), ":current": num(u.Current),
		":reason": str(u.Reason), ":detail": str(u.Detail),
	}
	_, err := s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table), Key: uploadKey(u.ID),
		UpdateExpression:    aws.String("SET #state = :state, #version = :version, #current = :current, #reason = :reason, #detail = :detail REMOVE claimedUntil"),
		ConditionExpression: aws.String("#state = :pending"),
		ExpressionAttributeNames: map[string]string{
			"#state": "state", "#version": "version", "#current": "current", "#reason": "reason", "#detail": "detail",
		},
		ExpressionAttributeValues: vals,
	})
	if err != nil && !isCondFailed(err) {
		return fmt.Errorf("objectsddb: settle %s: %w", u.ID, classify(err))
	}
	return nil
}
