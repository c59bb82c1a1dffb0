-- Wiki: categories and Markdown pages, private or public, optionally bot knowledge.
CREATE TABLE wiki_categories (
    id INTEGER PRIMARY KEY,
    account_id BIGINT NOT NULL REFERENCES accounts (id),
    name TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    UNIQUE (account_id, name)
);

CREATE TABLE wiki_pages (
    id INTEGER PRIMARY KEY,
    account_id BIGINT NOT NULL REFERENCES accounts (id),
    title TEXT NOT NULL,
    slug TEXT NOT NULL,
    category_id BIGINT REFERENCES wiki_categories (id),
    visibility TEXT NOT NULL,
    bot_knowledge BIGINT NOT NULL DEFAULT 0,
    excerpt TEXT NOT NULL,
    content TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    UNIQUE (account_id, slug)
);
