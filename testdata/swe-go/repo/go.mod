module github.com/agentic-opd/swe-go-toy

go 1.19
