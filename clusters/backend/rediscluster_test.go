package backend

import (
	"strings"
	"testing"
)

func TestParseClusterNodes(t *testing.T) {
	byAddr := map[string]string{"a:1": "n1", "a:2": "n2", "a:3": "n3", "a:4": "n4", "a:5": "n5", "a:6": "n6"}
	all := map[string]bool{"n1": true, "n2": true, "n3": true, "n4": true, "n5": true, "n6": true}
	healthy := `i1 a:1@11 myself,master - 0 0 1 connected 0-5460
i2 a:2@12 master - 0 0 2 connected 5461-10922
i3 a:3@13 master - 0 0 3 connected 10923-16383
i4 a:4@14 slave i1 0 0 1 connected
i5 a:5@15 slave i2 0 0 2 connected
i6 a:6@16 slave i3 0 0 3 connected`
	failedOver := `i1 a:1@11 master,fail - 0 0 1 disconnected
i2 a:2@12 myself,master - 0 0 2 connected 5461-10922
i3 a:3@13 master - 0 0 3 connected 10923-16383
i4 a:4@14 master - 0 0 7 connected 0-5460
i5 a:5@15 slave i2 0 0 2 connected
i6 a:6@16 slave i3 0 0 3 connected`
	n1Down := map[string]bool{"n2": true, "n3": true, "n4": true, "n5": true, "n6": true}
	tests := []struct {
		name, text string
		up         map[string]bool
		want       string // "" for healthy, else part of the error
		masters    []string
	}{
		{"healthy", healthy, all, "", []string{"n1", "n2", "n3"}},
		{"master down, not failed over", healthy, n1Down, "master n1 serves 5461 slots but is down", nil},
		{"failed over", failedOver, n1Down, "", []string{"n2", "n3", "n4"}},
		{"slots missing", strings.Replace(healthy, "10923-16383", "10923-16000", 1), all, "owning 16384", nil},
		{"unknown node", strings.Replace(healthy, "a:6@16", "b:6@16", 1), all, "unknown node b:6", nil},
		{"replica link down", strings.Replace(healthy, "0 0 2 connected\ni6", "0 0 2 disconnected\ni6", 1), all, "replica n5", nil},
		{"bad line", "i1 a:1", all, "bad CLUSTER NODES line", nil},
	}
	for _, tt := range tests {
		roles, err := ParseRedisClusterNodes(tt.text, byAddr, tt.up, 3)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: err %v, want %q", tt.name, err, tt.want)
		}
		for _, m := range tt.masters {
			if roles[m] != RoleMaster {
				t.Errorf("%s: %s has role %q, want master", tt.name, m, roles[m])
			}
		}
	}
}

func TestSelfRole(t *testing.T) {
	for _, tt := range []struct {
		name, text, want, wantErr string
	}{
		{"master", "i1 a:1@11 myself,master - 0 0 1 connected 0-5460\ni4 a:4@14 slave i1 0 0 1 connected", RoleMaster, ""},
		{"replica", "i1 a:1@11 master - 0 0 1 connected 0-5460\ni4 a:4@14 myself,slave i1 0 0 1 connected", RoleReplica, ""},
		{"promoted", "i1 a:1@11 master,fail - 0 0 1 disconnected\ni4 a:4@14 myself,master - 0 0 7 connected 0-5460", RoleMaster, ""},
		{"master without slots", "i1 a:1@11 myself,master - 0 0 1 connected\ni4 a:4@14 master - 0 0 7 connected 0-5460", "", "serves no slots"},
		{"only migrating slots", "i1 a:1@11 myself,master - 0 0 1 connected [93->-i4]", "", "serves no slots"},
		{"failing", "i1 a:1@11 myself,master,fail? - 0 0 1 connected 0-5460", "", "flagged myself,master,fail?"},
		{"no myself", "i1 a:1@11 master - 0 0 1 connected 0-5460", "", "no line of CLUSTER NODES is flagged myself"},
		{"bad slot", "i1 a:1@11 myself,master - 0 0 1 connected x-5", "", `bad slot`},
	} {
		got, err := RedisClusterSelfRole(tt.text)
		switch {
		case tt.wantErr == "" && (err != nil || got != tt.want):
			t.Errorf("%s: %q, %v; want %q", tt.name, got, err, tt.want)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%s: %q, %v; want an error saying %q", tt.name, got, err, tt.wantErr)
		}
	}
}
