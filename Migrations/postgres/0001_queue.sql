-- The PostgreSQL queue's schema, first version. Settings shared by every haul process on the queue.
CREATE TABLE queue_settings (
    name  text   PRIMARY KEY,
    value bigint NOT NULL
);
INSERT INTO queue_settings (name, value) VALUES ('default_host_cap', 4);
