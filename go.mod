module github.com/agentic-opd/agenticopd

go 1.25
