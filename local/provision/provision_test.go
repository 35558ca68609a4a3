package provision

import "testing"

func TestSnakeUpper(t *testing.T) {
	for in, want := range map[string]string{
		"VotesQueueUrl": "VOTES_QUEUE_URL", "ArchiveBucketName": "ARCHIVE_BUCKET_NAME", "ApiUrl": "API_URL",
		"ObjectsTableStreamArn": "OBJECTS_TABLE_STREAM_ARN", "S3BucketARN": "S3_BUCKET_ARN", "HTTPApiUrl": "HTTP_API_URL",
	} {
		if got := SnakeUpper(in); got != want {
			t.Errorf("SnakeUpper(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLocalURL(t *testing.T) {
	s := &Stack{Options: Options{APIURL: "http://127.0.0.1:4000/"}}
	for in, want := range map[string]string{
		"https://abc.execute-api.us-east-1.amazonaws.com":        "http://127.0.0.1:4000",
		"https://abc.execute-api.us-east-1.amazonaws.com/prod/x": "http://127.0.0.1:4000/prod/x",
		"https://example.com/":                                   "https://example.com/",
	} {
		if got := s.localURL(in); got != want {
			t.Errorf("localURL(%q) = %q, want %q", in, got, want)
		}
	}
}
