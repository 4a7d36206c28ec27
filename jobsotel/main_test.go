package jobsotel_test

import (
	"testing"

	"github.com/jobs-dev/jobs/internal/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }
