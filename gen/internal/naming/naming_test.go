package naming

import "testing"

func TestExported(t *testing.T) {
	tests := map[string]string{
		"access_key_id":         "AccessKeyID",
		"secret_access_key":     "SecretAccessKey",
		"max_messages_per_file": "MaxMessagesPerFile",
		"s3_url":                "S3URL",
		"start_lsn":             "StartLSN",
		"ssl_mode":              "SSLMode",
		"tls":                   "TLS",
		"http_api_key":          "HTTPAPIKey",
		"aws_region":            "AWSRegion",
		"sql":                   "SQL",
		"json_lines":            "JSONLines",
		"uri":                   "URI",
		"2fa":                   "X2fa",
		"with-dash":             "WithDash",
		"type":                  "Type",
		"über":                  "Über",
		"日本":                    "X日本",
		"$":                     "X",
		"":                      "X",
	}
	for in, want := range tests {
		got := Exported(in)
		if got != want {
			t.Errorf("Exported(%q) = %q; want %q", in, got, want)
		}
		if !Valid(got) {
			t.Errorf("Exported(%q) = %q is not a valid identifier", in, got)
		}
	}
	if Part("3d") != "3d" || Part("json_lines") != "JSONLines" || Part("") != "" || Part("xray") != "Xray" {
		t.Error("Part")
	}
	if Package("s3_sink") != "s3sinkconfig" || Package("postgres_source") != "postgressourceconfig" || Package("9x") != "c9xconfig" {
		t.Error("Package")
	}
}

func TestScope(t *testing.T) {
	s := NewScope("Config")
	if s.Take("Config") != "Config2" || s.Take("Name") != "Name" || s.Take("Name") != "Name2" || s.Take("Name") != "Name3" || !s.Has("Name2") {
		t.Error("Take")
	}
}
