"""Where results and registrations are kept: the content-addressed cache, the imported
families, and the paths of both."""
