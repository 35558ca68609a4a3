package archiveddb

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/ddbpipe/ddbpipe/shared/archive"
)

// fakeDB is one table's control plane in memory; errs fails an operation
// by name.
type fakeDB struct {
	API        // nil: an operation the fake does not implement panics
	errs       map[string]error
	exists, dp bool
	// pitr: point-in-time recovery is on; pitrAsked counts the requests
	// turning it on.
	pitr      bool
	pitrAsked int
}

var _ API = (*fakeDB)(nil)

func (f *fakeDB) DescribeTable(_ context.Context, in *dynamodb.DescribeTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	if !f.exists {
		return nil, &types.ResourceNotFoundException{Message: aws.String("no table")}
	}
	return &dynamodb.DescribeTableOutput{Table: &types.TableDescription{TableName: in.TableName, TableStatus: types.TableStatusActive,
		TableArn: aws.String("arn:aws:dynamodb:us-east-1:1:table/" + aws.ToString(in.TableName)), DeletionProtectionEnabled: aws.Bool(f.dp)}}, nil
}

func (f *fakeDB) CreateTable(_ context.Context, in *dynamodb.CreateTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	if err := f.errs["CreateTable"]; err != nil {
		return nil, err
	}
	f.exists, f.dp = true, aws.ToBool(in.DeletionProtectionEnabled)
	return &dynamodb.CreateTableOutput{}, nil
}

func (f *fakeDB) UpdateTable(_ context.Context, in *dynamodb.UpdateTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateTableOutput, error) {
	if err := f.errs["UpdateTable"]; err != nil {
		return nil, err
	}
	if in.DeletionProtectionEnabled != nil {
		f.dp = *in.DeletionProtectionEnabled
	}
	return &dynamodb.UpdateTableOutput{}, nil
}

func (f *fakeDB) DescribeContinuousBackups(context.Context, *dynamodb.DescribeContinuousBackupsInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeContinuousBackupsOutput, error) {
	if err := f.errs["DescribeContinuousBackups"]; err != nil {
		return nil, err
	}
	status := types.PointInTimeRecoveryStatusDisabled
	if f.pitr {
		status = types.PointInTimeRecoveryStatusEnabled
	}
	return &dynamodb.DescribeContinuousBackupsOutput{ContinuousBackupsDescription: &types.ContinuousBackupsDescription{
		PointInTimeRecoveryDescription: &types.PointInTimeRecoveryDescription{PointInTimeRecoveryStatus: status}}}, nil
}

func (f *fakeDB) UpdateContinuousBackups(_ context.Context, in *dynamodb.UpdateContinuousBackupsInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateContinuousBackupsOutput, error) {
	if err := f.errs["UpdateContinuousBackups"]; err != nil {
		return nil, err
	}
	if s := in.PointInTimeRecoverySpecification; s != nil && aws.ToBool(s.PointInTimeRecoveryEnabled) {
		f.pitr = true
		f.pitrAsked++
	}
	return &dynamodb.UpdateContinuousBackupsOutput{}, nil
}

func (f *fakeDB) TagResource(context.Context, *dynamodb.TagResourceInput, ...func(*dynamodb.Options)) (*dynamodb.TagResourceOutput, error) {
	if err := f.errs["TagResource"]; err != nil {
		return nil, err
	}
	return &dynamodb.TagResourceOutput{}, nil
}

func apiErr(code string) error { return &smithy.GenericAPIError{Code: code, Message: "injected"} }

// Only DynamoDB Local's UnknownOperationException on the PITR and tagging
// calls is skipped, and only when Local; every other error surfaces.
func TestEnsureSkipsOnlyWhatTheLocalServerLacks(t *testing.T) {
	unknown := apiErr("UnknownOperationException")
	pitrNote := "local DynamoDB has no " + featurePITR + "; skipped"
	tagsNote := "local DynamoDB has no " + featureTags + "; skipped"
	tests := []struct {
		name      string
		local     bool
		exists    bool // the counter created the table (unprotected)
		errs      map[string]error
		wantCode  string // "" for success
		wantNotes []string
	}{
		{name: "AWS: nothing refused"},
		{name: "local: PITR and tags unknown, as DynamoDB Local answers", local: true,
			errs:      map[string]error{"DescribeContinuousBackups": unknown, "UpdateContinuousBackups": unknown, "TagResource": unknown},
			wantNotes: []string{pitrNote, tagsNote}},
		{name: "local: unknown PITR update after a describe that worked", local: true,
			errs: map[string]error{"UpdateContinuousBackups": unknown}, wantNotes: []string{pitrNote}},
		{name: "AWS: unknown operation surfaces", errs: map[string]error{"DescribeContinuousBackups": unknown}, wantCode: "UnknownOperationException"},
		{name: "local: throttled PITR describe surfaces", local: true,
			errs: map[string]error{"DescribeContinuousBackups": apiErr("ThrottlingException")}, wantCode: "ThrottlingException"},
		{name: "local: PITR update refused otherwise surfaces", local: true,
			errs: map[string]error{"UpdateContinuousBackups": apiErr("ValidationException")}, wantCode: "ValidationException"},
		{name: "local: tagging access denied surfaces", local: true,
			errs: map[string]error{"TagResource": apiErr("AccessDeniedException")}, wantCode: "AccessDeniedException"},
		{name: "local: create refused surfaces (no retry without protection)", local: true,
			errs: map[string]error{"CreateTable": apiErr("ValidationException")}, wantCode: "ValidationException"},
		{name: "local: deletion protection refused surfaces", local: true, exists: true,
			errs: map[string]error{"UpdateTable": unknown}, wantCode: "UnknownOperationException"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := &fakeDB{errs: tt.errs, exists: tt.exists}
			tables := &Tables{DB: db, Local: tt.local}
			_, _, err := tables.Ensure(t.Context(), archive.Spec{Name: "ddbpipe-votes-2026-12", Tags: map[string]string{"app": "ddbpipe"}})
			if tt.wantCode == "" && err != nil {
				t.Fatalf("Ensure: %v, want success", err)
			}
			if tt.wantCode != "" {
				var ae smithy.APIError
				if !errors.As(err, &ae) || ae.ErrorCode() != tt.wantCode {
					t.Fatalf("Ensure: %v, want %s", err, tt.wantCode)
				}
			}
			if got := tables.Notes(); !reflect.DeepEqual(got, tt.wantNotes) {
				t.Errorf("notes %q, want %q", got, tt.wantNotes)
			}
		})
	}
}

// Where the server has PITR, every month's table gets it: a new table, and
// one the counter created without it; a table that has it is left alone.
// Deletion protection likewise.
func TestEnsureTurnsOnPITRAndProtection(t *testing.T) {
	tests := []struct {
		name             string
		exists, dp, pitr bool
		wantAsked        int
	}{
		{name: "new table", wantAsked: 1},
		{name: "the counter's table, unprotected, no PITR", exists: true, wantAsked: 1},
		{name: "protected, PITR on already", exists: true, dp: true, pitr: true, wantAsked: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := &fakeDB{exists: tt.exists, dp: tt.dp, pitr: tt.pitr}
			tables := &Tables{DB: db}
			tb, _, err := tables.Ensure(t.Context(), archive.Spec{Name: "ddbpipe-votes-2026-12"})
			if err != nil {
				t.Fatal(err)
			}
			if !db.pitr || db.pitrAsked != tt.wantAsked {
				t.Errorf("PITR on %v after %d requests, want on after %d", db.pitr, db.pitrAsked, tt.wantAsked)
			}
			if !db.dp || !tb.DeletionProtection {
				t.Errorf("deletion protection %v (table says %v), want on", db.dp, tb.DeletionProtection)
			}
			if len(tables.Notes()) != 0 {
				t.Errorf("notes %q against a server with PITR", tables.Notes())
			}
		})
	}
}
