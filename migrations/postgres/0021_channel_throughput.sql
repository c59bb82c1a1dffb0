-- The provider throughput of each number, messages/s (issue 25): read from the number's
-- throughput level (STANDARD 80, HIGH 1,000; coexistence numbers 20). NULL: not read yet (80).
ALTER TABLE channels ADD COLUMN throughput_mps INTEGER;
